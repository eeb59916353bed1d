package configs

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/webhook/admission/pod"
)

// Service accounts nicpool's components run as, in Options.Namespace.
const (
	WebhookServiceAccount = "nicpool-webhook"
	IpamdServiceAccount   = "nicpool-ipamd"
)

// Names of the ValidatingAdmissionPolicies (each bound by a binding of the same name).
const (
	EndpointsPolicy  = "spiderendpoints.nicpool.io"
	TakeoversPolicy  = "spiderendpoint-takeovers.nicpool.io"
	PoolStatusPolicy = "spiderippool-status.nicpool.io"
	PodsPolicy       = "pods.nicpool.io"
	BlocksPolicy     = "ipblocks.nicpool.io"
	LeasesPolicy     = "leases.nicpool.io"
)

// HeartbeatLeasePrefix begins the name of each node's heartbeat Lease, which that
// node's ipamd renews (ipamd/daemon.LeaseName).
const HeartbeatLeasePrefix = "nicpool-ipamd-"

// OverrideVerb is the verb on ipblocks (group ipam.nicpool.io) that lets a principal
// other than nicpool's service accounts write allocation records: no role grants it
// by name, so it is held by roles with every verb (cluster-admin, system:masters)
// and by roles an administrator writes for it.
const OverrideVerb = "override"

// NodeNameExtra is the user extra the API server sets from a service account token
// bound to a pod or a node: the node that pod runs on.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// SpiderSubnetAnnotations are spiderpool's SpiderSubnet pod annotations. nicpool has
// no SpiderSubnet: a pod carrying one is refused instead of landing in some other pool.
var SpiderSubnetAnnotations = []string{
	"ipam.spidernet.io/subnet",
	"ipam.spidernet.io/subnets",
	"ipam.spidernet.io/ippool-ip-number",
	"ipam.spidernet.io/ippool-reclaim",
}

// Policies returns nicpool's ValidatingAdmissionPolicies and their bindings: the
// checks the API server makes by itself, so they hold whether or not the webhook is
// up.
//
//   - SpiderEndpoints are written only by nicpool's service accounts, and an ipamd
//     writes only endpoints of its own node, as named by its token (as NodeRestriction
//     confines kubelets); every record names one interface once, with addresses that
//     parse. The node path (CNI ADD and DEL) thus never waits for the webhook.
//   - Pool status (the allocation records) is written only by nicpool's service
//     accounts.
//   - IPBlocks (the allocation records) are written only by nicpool's service
//     accounts, or by a principal allowed OverrideVerb on them (a cluster admin
//     releasing a stuck record); an ipamd creates only empty blocks of its own node
//     (or, moving an older layout's records, blocks of no node) and never gives a
//     block to another node. Which records in a block an ipamd changes is not
//     confined: see blocksSpec.
//   - A pod that uses nicpool's admission has every ippools entry resolved (interface
//     named, no wildcard left; ipam.spidernet.io/ippool only beside the one eth0
//     entry it was turned into) and, when a StatefulSet controls it, nicpool's
//     endpoint stamp: what the mutating webhook leaves. A pod with a SpiderSubnet
//     annotation is refused.
//   - An ipamd writes only its own node's heartbeat Lease (HeartbeatLeasePrefix and
//     the node its token names): never the webhook's leader election Lease, nor
//     another node's heartbeat.
func Policies(o Options) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	o = o.withDefaults()
	policies := []*admissionregistrationv1.ValidatingAdmissionPolicy{
		policy(EndpointsPolicy, endpointsSpec(o)),
		policy(TakeoversPolicy, takeoversSpec(o)),
		policy(PoolStatusPolicy, poolStatusSpec(o)),
		policy(PodsPolicy, podsSpec()),
		policy(BlocksPolicy, blocksSpec(o)),
		policy(LeasesPolicy, leasesSpec(o)),
	}
	bindings := make([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, 0, len(policies))
	for _, p := range policies {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: map[string]string{partOf: "nicpool"}},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        p.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
		if p.Name == TakeoversPolicy {
			// The pods a takeover is checked against: the StatefulSet pods of the
			// endpoint's namespace, as the API server's own pod informer holds them.
			// None (no StatefulSet pod there) leaves nothing to check.
			allow := admissionregistrationv1.AllowAction
			b.Spec.ParamRef = &admissionregistrationv1.ParamRef{
				Selector:                &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: appsv1.StatefulSetPodNameLabel, Operator: metav1.LabelSelectorOpExists}}},
				ParameterNotFoundAction: &allow,
			}
		}
		if p.Name == PodsPolicy {
			// As the pod webhooks: nicpool must be able to start its own pods.
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: o.namespaceSelector()}
		}
		bindings = append(bindings, b)
	}
	return policies, bindings
}

const partOf = "app.kubernetes.io/part-of"

func policy(name string, spec admissionregistrationv1.ValidatingAdmissionPolicySpec) *admissionregistrationv1.ValidatingAdmissionPolicy {
	fail := admissionregistrationv1.Fail
	spec.FailurePolicy = &fail
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{partOf: "nicpool"}},
		Spec:       spec,
	}
}

func constraints(groups []string, resource string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	equivalent := admissionregistrationv1.Equivalent
	var named []admissionregistrationv1.NamedRuleWithOperations
	for _, r := range rules(groups, "*", resource, scope, ops...) {
		named = append(named, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: r})
	}
	return &admissionregistrationv1.MatchResources{ResourceRules: named, MatchPolicy: &equivalent}
}

// cel quotes s as a CEL string literal.
func cel(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// writerVariables say who is writing: nicpool's ipamd (and the node its token names,
// "" when none), nicpool's webhook, or anyone else.
func writerVariables(o Options) []admissionregistrationv1.Variable {
	extra := "request.userInfo.extra[" + cel(NodeNameExtra) + "]"
	return []admissionregistrationv1.Variable{
		{Name: "ipamd", Expression: "request.userInfo.username == " + cel(serviceAccountUser(o.Namespace, IpamdServiceAccount))},
		{Name: "nicpool", Expression: "variables.ipamd || request.userInfo.username == " + cel(serviceAccountUser(o.Namespace, WebhookServiceAccount))},
		{Name: "node", Expression: "has(request.userInfo.extra) && " + cel(NodeNameExtra) + " in request.userInfo.extra && size(" + extra + ") == 1 ? " + extra + "[0] : ''"},
	}
}

func onlyNicpool(o Options, what string) admissionregistrationv1.Validation {
	return admissionregistrationv1.Validation{
		Expression: "variables.nicpool",
		Reason:     ptrTo(metav1.StatusReasonForbidden),
		Message: fmt.Sprintf("%s is written only by nicpool's service accounts (%s and %s in namespace %s): it records which pod holds which address. Delete the pod to release its addresses",
			what, IpamdServiceAccount, WebhookServiceAccount, o.Namespace),
	}
}

func endpointsSpec(o Options) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	// field reads a status.current field of obj (object or oldObject), "" when unset.
	field := func(obj, name string) string {
		return "has(" + obj + ".status) && has(" + obj + ".status.current) && has(" + obj + ".status.current." + name + ") ? " + obj + ".status.current." + name + " : ''"
	}
	ips := "variables.records"
	// same says an UPDATE leaves the optional field unchanged.
	same := func(f string) string {
		parent, name := "", f
		if i := strings.LastIndexByte(f, '.'); i >= 0 {
			parent, name = "."+f[:i], f[i+1:]
		}
		return "(has(object" + parent + "." + name + ") == has(oldObject" + parent + "." + name + ") && (!has(object" + parent + "." + name + ") || object." + f + " == oldObject." + f + "))"
	}
	// The records are checked on every write that keeps the endpoint; removing it
	// (and writes to one being deleted) are never blocked by what it holds.
	keeps := "request.operation == 'DELETE' || has(object.metadata.deletionTimestamp) || "
	forbidden := ptrTo(metav1.StatusReasonForbidden)
	invalid := ptrTo(metav1.StatusReasonInvalid)
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: constraints([]string{v2beta1.GroupVersion.Group}, "spiderendpoints", admissionregistrationv1.NamespacedScope,
			admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
		Variables: append(writerVariables(o),
			admissionregistrationv1.Variable{Name: "newNode", Expression: "request.operation == 'DELETE' ? '' : " + field("object", "node")},
			admissionregistrationv1.Variable{Name: "oldNode", Expression: "request.operation != 'UPDATE' ? '' : " + field("oldObject", "node")},
			admissionregistrationv1.Variable{Name: "newUID", Expression: "request.operation == 'DELETE' ? '' : " + field("object", "uid")},
			admissionregistrationv1.Variable{Name: "oldUID", Expression: "request.operation != 'UPDATE' ? '' : " + field("oldObject", "uid")},
			admissionregistrationv1.Variable{Name: "onlyFinalizers", Expression: "request.operation == 'UPDATE' && has(oldObject.metadata.deletionTimestamp) && " +
				same("status") + " && " + same("metadata.labels") + " && " + same("metadata.annotations") + " && " + same("metadata.ownerReferences")},
			admissionregistrationv1.Variable{Name: "records", Expression: "request.operation != 'DELETE' && has(object.status) && has(object.status.current) && has(object.status.current.ips) ? object.status.current.ips : []"},
			admissionregistrationv1.Variable{Name: "oldRecords", Expression: "request.operation == 'UPDATE' && has(oldObject.status) && has(oldObject.status.current) && has(oldObject.status.current.ips) ? oldObject.status.current.ips : []"},
			admissionregistrationv1.Variable{Name: "deletedNode", Expression: "request.operation != 'DELETE' ? '' : " + field("oldObject", "node")},
			admissionregistrationv1.Variable{Name: "newPrevious", Expression: "request.operation != 'DELETE' && has(object.metadata.annotations) && " + cel(endpointPreviousUIDs) + " in object.metadata.annotations ? object.metadata.annotations[" + cel(endpointPreviousUIDs) + "] : ''"},
			admissionregistrationv1.Variable{Name: "oldPrevious", Expression: "request.operation != 'CREATE' && has(oldObject.metadata.annotations) && " + cel(endpointPreviousUIDs) + " in oldObject.metadata.annotations ? oldObject.metadata.annotations[" + cel(endpointPreviousUIDs) + "] : ''"},
		),
		Validations: []admissionregistrationv1.Validation{
			// Anyone RBAC lets delete an endpoint may: the namespace controller does, and
			// an admin discards an inconsistent one; and finalizers of one being deleted
			// may be removed. Creating or changing one is nicpool's alone.
			{
				Expression: "request.operation == 'DELETE' || variables.nicpool || variables.onlyFinalizers",
				Reason:     forbidden,
				Message: fmt.Sprintf("SpiderEndpoints are written only by nicpool's service accounts (%s and %s in namespace %s): an endpoint decides which pod's addresses a node takes over. Delete the pod to release its addresses, or delete the endpoint to discard it",
					IpamdServiceAccount, WebhookServiceAccount, o.Namespace),
			},
			{
				Expression: "!variables.ipamd || request.operation == 'DELETE' || variables.node != ''",
				Reason:     forbidden,
				Message: fmt.Sprintf("%s's credentials name no node (user extra %s): run it with a service account token bound to its pod, as the DaemonSet's projected token is, so the API server knows which node it acts for",
					IpamdServiceAccount, NodeNameExtra),
			},
			{
				Expression:        "!variables.ipamd || request.operation == 'DELETE' || variables.newNode == variables.node",
				Reason:            forbidden,
				MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" may write only SpiderEndpoints whose status.current.node is that node, not ") + " + (variables.newNode == '' ? 'empty' : variables.newNode)",
			},
			{
				// A node takes over another node's endpoint only for a new pod UID: a
				// StatefulSet pod recreated on it.
				Expression:        "!variables.ipamd || request.operation != 'UPDATE' || variables.oldNode == variables.node || variables.oldUID != variables.newUID",
				Reason:            forbidden,
				MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" may not change the SpiderEndpoint of pod UID ") + " + variables.oldUID + " + cel(" on node ") + " + variables.oldNode + " + cel(": only a new pod of that name on this node takes it over"),
			},
			{
				// A takeover (any change of the pod UID) keeps a subset of the
				// predecessor's records, as ipamd's takeover writes: it moves addresses
				// to the new pod, never adds one.
				Expression:        "!variables.ipamd || request.operation != 'UPDATE' || variables.oldUID == variables.newUID || " + ips + ".all(d, variables.oldRecords.exists(e, " + keptRecordCEL("d", "e") + "))",
				Reason:            forbidden,
				MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" takes over the SpiderEndpoint of pod UID ") + " + variables.oldUID + " + cel(" only keeping some of its records (status.current.ips) unchanged for the new pod; it adds or changes none"),
			},
			{
				// Only a StatefulSet pod's endpoint is taken over (ipamd's successor
				// rule), as its node recorded it: the kind is changed with the pod UID
				// only, so another node cannot make a Deployment pod's endpoint one.
				Expression:        "!variables.ipamd || request.operation != 'UPDATE' || variables.oldUID == variables.newUID || (has(oldObject.status.ownerControllerType) && oldObject.status.ownerControllerType == " + cel(workload.KindStatefulSet) + ")",
				Reason:            forbidden,
				MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" takes over only the SpiderEndpoint of a StatefulSet pod (status.ownerControllerType StatefulSet), not ") + " + object.metadata.namespace + '/' + object.metadata.name + " + cel(": delete the endpoint, or let nicpool's garbage collector do so once its pod is gone"),
			},
			{
				// The previous UIDs only grow, by the UID a takeover replaces; an
				// endpoint never returns to one of them. So no sequence of takeovers by
				// any ipamd hands a pod's endpoint back to that pod changed.
				Expression: "!variables.ipamd || request.operation != 'UPDATE' || (variables.oldUID == variables.newUID ? variables.newPrevious == variables.oldPrevious : " +
					"(variables.newPrevious == (variables.oldPrevious == '' ? variables.oldUID : variables.oldPrevious + ' ' + variables.oldUID) && !(variables.newUID in variables.oldPrevious.split(' '))))",
				Reason: forbidden,
				MessageExpression: "variables.oldUID != variables.newUID && variables.oldPrevious.split(' ').exists(u, u == variables.newUID) ? " +
					cel("SpiderEndpoint ") + " + object.metadata.namespace + '/' + object.metadata.name + " + cel(" belonged to pod UID ") + " + variables.newUID + " + cel(" before: an endpoint never goes back to a previous pod UID (metadata.annotations["+endpointPreviousUIDs+"])") + " : " +
					cel("metadata.annotations["+endpointPreviousUIDs+"] of a SpiderEndpoint only grows, by the pod UID a takeover replaces"),
			},
			{
				// An ipamd deletes only its own node's endpoints that no pod took over:
				// others it takes over (discarding their records) and the garbage
				// collector deletes.
				Expression:        "!variables.ipamd || request.operation != 'DELETE' || ((variables.deletedNode == '' || variables.deletedNode == variables.node) && variables.oldPrevious == '')",
				Reason:            forbidden,
				MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" deletes only SpiderEndpoints of that node that were never taken over, not ") + " + oldObject.metadata.namespace + '/' + oldObject.metadata.name + (variables.oldPrevious != '' ? " + cel(" (taken over before: nicpool's garbage collector deletes it once its pod is gone)") + " : " + cel(" of node ") + " + variables.deletedNode)",
			},
			{
				Expression: keeps + "variables.newUID != ''",
				Reason:     invalid,
				Message:    "status.current.uid: Required value: the metadata.uid of the pod that holds these addresses",
			},
			{
				Expression: keeps + ips + ".all(d, has(d.interface) && " + interfaceNameCEL("d.interface") + ")",
				Reason:     invalid,
				Message:    "status.current.ips[*].interface: Invalid value: every record names the pod interface it belongs to, a Linux interface name of 1 to 15 printable ASCII characters without '/', ':' or white space, e.g. net1",
			},
			{
				Expression: keeps + ips + ".all(d, !has(d.interface) || " + ips + ".exists_one(e, has(e.interface) && e.interface == d.interface))",
				Reason:     invalid,
				Message:    "status.current.ips[*].interface: Duplicate value: keep one record per interface",
			},
			{
				Expression: keeps + ips + ".all(d, has(d.ipv4) || has(d.ipv6))",
				Reason:     invalid,
				Message:    "status.current.ips[*]: Required value: an ipv4 or ipv6 address for every interface",
			},
			{
				Expression: keeps + ips + ".all(d, (!has(d.ipv4) || (isCIDR(d.ipv4) && cidr(d.ipv4).ip().family() == 4)) && (!has(d.ipv6) || (isCIDR(d.ipv6) && cidr(d.ipv6).ip().family() == 6)))",
				Reason:     invalid,
				Message:    "status.current.ips[*].ipv4, ipv6: Invalid value: an address with the pool's prefix length of its family, e.g. 10.6.0.10/16 or fd00:6::10/64",
			},
		},
	}
}

// takeoversSpec holds a takeover (an ipamd's change of an endpoint's pod UID) to the
// pod it is for: the pod of the endpoint's name, as the API server knows it, must
// have the new UID and be bound to the writing ipamd's node, and not be terminating.
// So while a StatefulSet pod lives, no ipamd but its own node's moves its endpoint
// to any other UID, and its own node only to its own UID; once it is gone, only the
// node its successor is bound to takes the endpoint over, for that successor. The
// pods are the policy's params (the binding selects the namespace's StatefulSet
// pods), each checked on its own: a pod of another name passes.
func takeoversSpec(o Options) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	uid := func(obj string) string {
		return "has(" + obj + ".status) && has(" + obj + ".status.current) && has(" + obj + ".status.current.uid) ? " + obj + ".status.current.uid : ''"
	}
	mine := "params.metadata.uid == variables.newUID && has(params.spec.nodeName) && params.spec.nodeName == variables.node && !has(params.metadata.deletionTimestamp)"
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "Pod"},
		MatchConstraints: constraints([]string{v2beta1.GroupVersion.Group}, "spiderendpoints", admissionregistrationv1.NamespacedScope, admissionregistrationv1.Update),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name:       "ipamd-changes-the-pod-uid",
			Expression: "request.userInfo.username == " + cel(serviceAccountUser(o.Namespace, IpamdServiceAccount)) + " && (" + uid("object") + ") != (" + uid("oldObject") + ")",
		}},
		Variables: append(writerVariables(o),
			admissionregistrationv1.Variable{Name: "newUID", Expression: uid("object")},
		),
		Validations: []admissionregistrationv1.Validation{{
			Expression: "params.metadata.name != object.metadata.name || (" + mine + ")",
			Reason:     ptrTo(metav1.StatusReasonForbidden),
			MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" takes over SpiderEndpoint ") + " + object.metadata.namespace + '/' + object.metadata.name + " +
				cel(" only for the pod of that name bound to that node (status.current.uid its metadata.uid): pod ") + " + params.metadata.namespace + '/' + params.metadata.name + " + cel(" is UID ") + " + params.metadata.uid + " +
				"(has(params.spec.nodeName) ? " + cel(" on node ") + " + params.spec.nodeName : " + cel(", not bound to a node") + ") + (has(params.metadata.deletionTimestamp) ? " + cel(", terminating") + " : '') + " +
				cel("; a StatefulSet pod's successor takes its endpoint over once it is gone and the successor is bound"),
		}},
	}
}

// endpointPreviousUIDs is the list of an endpoint's previous pod UIDs.
const endpointPreviousUIDs = endpoint.PreviousUIDsAnnotation

// keptRecordCEL says endpoint record d is record e of the same interface with some of
// its fields (a family's address, pool and gateway) left out and none changed.
func keptRecordCEL(d, e string) string {
	out := e + ".interface == " + d + ".interface"
	for _, f := range []string{"ipv4", "ipv6", "ipv4Pool", "ipv6Pool", "ipv4Gateway", "ipv6Gateway", "vlan", "cleanGateway", "routes"} {
		out += " && (!has(" + d + "." + f + ") || (has(" + e + "." + f + ") && " + d + "." + f + " == " + e + "." + f + "))"
	}
	return out
}

// interfaceNameCEL is annotations.ValidateInterfaceName as CEL: 1 to 15 printable
// ASCII characters without '/', ':' or white space, not "." or "..". A test holds
// the two to the same catalogue.
func interfaceNameCEL(v string) string {
	return v + ".matches('^[!-.0-9;-~]{1,15}$') && " + v + " != '.' && " + v + " != '..'"
}

func poolStatusSpec(o Options) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: constraints([]string{v2beta1.GroupVersion.Group}, "spiderippools/status", admissionregistrationv1.ClusterScope, admissionregistrationv1.Update),
		Variables:        writerVariables(o),
		Validations:      []admissionregistrationv1.Validation{onlyNicpool(o, "SpiderIPPool status")},
	}
}

// leasesSpec confines ipamd's Lease writes to its own node's heartbeat.
func leasesSpec(o Options) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: constraints([]string{"coordination.k8s.io"}, "leases", admissionregistrationv1.NamespacedScope, admissionregistrationv1.Create, admissionregistrationv1.Update),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name: "ipamd", Expression: "request.userInfo.username == " + cel(serviceAccountUser(o.Namespace, IpamdServiceAccount)),
		}},
		Variables: writerVariables(o),
		Validations: []admissionregistrationv1.Validation{{
			Expression: "variables.node != '' && object.metadata.name == " + cel(HeartbeatLeasePrefix) + " + variables.node",
			Reason:     ptrTo(metav1.StatusReasonForbidden),
			Message:    fmt.Sprintf("%s writes only the heartbeat Lease of its own node (%sNODE, NODE as its token names it)", IpamdServiceAccount, HeartbeatLeasePrefix),
		}},
	}
}

// blocksSpec confines IPBlock writes as far as ipamd/ledger makes it sound.
//
// Who: nicpool's service accounts, or a principal allowed OverrideVerb on ipblocks.
// Anyone else (RBAC permitting) may only change a block's labels and annotations,
// which nothing of nicpool reads, and delete a block that holds no record. Every
// other field is what the ledger relies on: spec and status are the records; the
// ownerReference to the pool is how deleting the pool removes its blocks, so a forged
// one would have the Kubernetes garbage collector delete a block with its records;
// a finalizer removed from a block being deleted deletes it. A block being deleted
// gains no address, whoever writes, so that no record is written into a block about
// to go.
//
// Which node, for an ipamd: it claims a block by creating it empty with spec.node set
// to its own node; moving an older layout's records (ledger.Migrate) creates blocks of
// no node; the only change of spec.node is a block of no node taken by the node that
// writes into it. The records inside a block are not confined to the ipamd's node, and
// cannot be soundly: an ipamd allocates in another node's block once every block of
// the pool is claimed, a StatefulSet pod that moved nodes takes over (and later
// releases) records in its old node's block, and the records name a pod, not its
// node, which the API server cannot look up in a policy. The ownership rule
// (allocator.Owner.Holds) and the endpoint policy confine those writes in nicpool.
func blocksSpec(o Options) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	forbidden := ptrTo(metav1.StatusReasonForbidden)
	node := func(obj string) string { return "(has(" + obj + ".spec.node) ? " + obj + ".spec.node : '')" }
	records := func(obj string) string {
		return "(has(" + obj + ".status) && has(" + obj + ".status.allocations) ? " + obj + ".status.allocations : {})"
	}
	// same says an UPDATE leaves the optional metadata field unchanged.
	same := func(f string) string {
		return "(has(object.metadata." + f + ") == has(oldObject.metadata." + f + ") && (!has(object.metadata." + f + ") || object.metadata." + f + " == oldObject.metadata." + f + "))"
	}
	gr := ipamv1alpha1.GroupVersion.Group
	writers := fmt.Sprintf("nicpool's service accounts (%s and %s in namespace %s), or whom RBAC allows the verb %q on ipblocks.%s (cluster-admin does)",
		IpamdServiceAccount, WebhookServiceAccount, o.Namespace, OverrideVerb, gr)
	privileged := "variables.nicpool || variables.override || request.operation != 'UPDATE'"
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: constraints([]string{gr}, "ipblocks", admissionregistrationv1.ClusterScope,
			admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
		Variables: append(writerVariables(o),
			admissionregistrationv1.Variable{Name: "override", Expression: "authorizer.group(" + cel(gr) + ").resource('ipblocks').check(" + cel(OverrideVerb) + ").allowed()"},
			admissionregistrationv1.Variable{Name: "newNode", Expression: "request.operation == 'DELETE' ? '' : " + node("object")},
			admissionregistrationv1.Variable{Name: "oldNode", Expression: "request.operation == 'UPDATE' ? " + node("oldObject") + " : ''"},
			admissionregistrationv1.Variable{Name: "newRecords", Expression: "request.operation == 'DELETE' ? {} : " + records("object")},
			admissionregistrationv1.Variable{Name: "oldRecords", Expression: "request.operation == 'CREATE' ? {} : " + records("oldObject")},
			admissionregistrationv1.Variable{Name: "empty", Expression: "size(variables.newRecords) == 0"},
			admissionregistrationv1.Variable{Name: "recordsKept", Expression: "request.operation == 'UPDATE' && object.spec == oldObject.spec && has(object.status) == has(oldObject.status) && (!has(object.status) || object.status == oldObject.status)"},
		),
		Validations: []admissionregistrationv1.Validation{
			{
				Expression: "variables.nicpool || variables.override || request.operation == 'DELETE' || variables.recordsKept",
				Reason:     forbidden,
				Message:    "IPBlocks are written only by " + writers + ": each record says which pod holds an address. Delete the pod to release its addresses",
			},
			{
				// What a deletion erases: the records. An empty block may go (the pool's
				// finalizer and the garbage collector remove those of a deleted pool).
				Expression:        "request.operation != 'DELETE' || variables.nicpool || variables.override || size(variables.oldRecords) == 0",
				Reason:            forbidden,
				MessageExpression: cel("IPBlock ") + " + oldObject.metadata.name + " + cel(" still records ") + " + string(size(variables.oldRecords)) + " + cel(" addresses of pods, and is deleted only by "+writers+": deleting it would free addresses pods may still use. Delete the pods first, or release stuck records with kubectl nicpool release"),
			},
			{
				Expression: privileged + " || " + same("ownerReferences"),
				Reason:     forbidden,
				Message:    "metadata.ownerReferences of an IPBlock is changed only by " + writers + ": it ties the block to its pool, and the garbage collector deletes a block, records included, whose owner is gone",
			},
			{
				// A finalizer held by a block being deleted is the last thing that keeps
				// it; without records, it may go.
				Expression: privileged + " || " + same("finalizers") + " || (size(variables.oldRecords) == 0 && (!has(object.metadata.finalizers) || object.metadata.finalizers.all(f, has(oldObject.metadata.finalizers) && f in oldObject.metadata.finalizers)))",
				Reason:     forbidden,
				Message:    "metadata.finalizers of an IPBlock that holds records is changed only by " + writers + ": removing the last finalizer of a block being deleted deletes its records",
			},
			{
				// An admin's override is exempt; nicpool's service accounts are not, even
				// where RBAC grants them every verb.
				Expression:        "(variables.override && !variables.nicpool) || request.operation != 'UPDATE' || !has(oldObject.metadata.deletionTimestamp) || variables.newRecords.all(a, a in variables.oldRecords)",
				Reason:            forbidden,
				MessageExpression: cel("IPBlock ") + " + object.metadata.name + " + cel(" is being deleted: no address is allocated in it (its records would go with it); allocate in another block"),
			},
			{
				Expression: "!variables.ipamd || request.operation == 'DELETE' || variables.node != ''",
				Reason:     forbidden,
				Message: fmt.Sprintf("%s's credentials name no node (user extra %s): run it with a service account token bound to its pod, as the DaemonSet's projected token is, so the API server knows which node it acts for",
					IpamdServiceAccount, NodeNameExtra),
			},
			{
				// A claim: an empty block of its own node. Moving an older layout's
				// records: a block of no node.
				Expression:        "!variables.ipamd || request.operation != 'CREATE' || variables.newNode == '' || (variables.newNode == variables.node && variables.empty)",
				Reason:            forbidden,
				MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" creates only empty IPBlocks of that node (spec.node), or blocks of no node when it moves a pool's records into blocks; not ") + " + (variables.newNode == variables.node ? 'a block already holding records' : 'a block of node ' + variables.newNode)",
			},
			{
				Expression:        "!variables.ipamd || request.operation != 'UPDATE' || variables.newNode == variables.oldNode || (variables.oldNode == '' && variables.newNode == variables.node)",
				Reason:            forbidden,
				MessageExpression: cel(IpamdServiceAccount+" of node ") + " + variables.node + " + cel(" may not change spec.node of IPBlock ") + " + object.metadata.name + " + cel(" from ") + " + (variables.oldNode == '' ? 'none' : variables.oldNode) + " + cel(" to ") + " + (variables.newNode == '' ? 'none' : variables.newNode) + " + cel(": a node takes only a block of no node"),
			},
		},
	}
}

// resolvedSelections matches ipam.spidernet.io/ippools as the mutating webhook writes
// it (annotations.Marshal of resolved selections): every entry names its interface
// first, every pool is a concrete name (no wildcard).
//
// singleSelection matches the ippools the webhook turns ipam.spidernet.io/ippool into
// (one entry, for eth0), beside which it keeps ippool as the marker that the pod chose
// eth0's pools only.
var resolvedSelections, singleSelection = func() (string, string) {
	pool := `"[a-z0-9][-a-z0-9.]*"`
	pools := `\[` + pool + `(?:,` + pool + `)*\]`
	rest := `(?:,"ipv4":` + pools + `)?(?:,"ipv6":` + pools + `)?(?:,"cleangateway":true)?\}`
	entry := `\{"interface":"(?:[^"\\]|\\.)+"` + rest
	eth0 := `\{"interface":"` + annotations.DefaultInterface + `"` + rest
	return `^\[` + entry + `(?:,` + entry + `)*\]$`, `^\[` + eth0 + `\]$`
}()

// ImmutablePodAnnotations are the pod annotations admission decides on: what a pod
// selects (resolved at CREATE into concrete pools per interface, within admission's
// bounds), the routes nicpool gives its interfaces, the endpoint stamp, and Multus's
// networks (which interfaces the pod has, and which NAD attaches each: the entries
// were resolved against them, and a pool's multusName admits by them). They are
// fixed once the pod exists: an edit would reach ipamd without admission.
var ImmutablePodAnnotations = []string{annotations.IPPools, annotations.IPPool, annotations.Routes, annotations.EndpointUID, annotations.MultusNetworks, annotations.MultusDefaultNetwork}

func podsSpec() admissionregistrationv1.ValidatingAdmissionPolicySpec {
	ann := "object.metadata.annotations"
	subnets := make([]string, len(SpiderSubnetAnnotations))
	for i, k := range SpiderSubnetAnnotations {
		subnets[i] = cel(k)
	}
	subnetList := "[" + strings.Join(subnets, ", ") + "]"
	fixed := make([]string, len(ImmutablePodAnnotations))
	for i, k := range ImmutablePodAnnotations {
		fixed[i] = cel(k)
	}
	fixedList := "[" + strings.Join(fixed, ", ") + "]"
	sts := "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, " + statefulSetOwnerCEL("r") + ")"
	unresolved := "is not as nicpool's mutating webhook leaves it: check that nicpool's MutatingWebhookConfiguration is installed and that no later webhook rewrites nicpool's annotations"
	invalid := ptrTo(metav1.StatusReasonInvalid)
	onCreate := "request.operation != 'CREATE' || "
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: constraints([]string{""}, "pods", admissionregistrationv1.NamespacedScope, admissionregistrationv1.Create, admissionregistrationv1.Update),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name: podConditionName,
			Expression: "request.operation == 'UPDATE' ? " +
				"((has(" + ann + ") && " + fixedList + ".exists(k, k in " + ann + ")) || (has(oldObject.metadata.annotations) && " + fixedList + ".exists(k, k in oldObject.metadata.annotations))) : " +
				"(" + podCondition + " || (has(" + ann + ") && " + subnetList + ".exists(k, k in " + ann + ")))",
		}},
		Variables: []admissionregistrationv1.Variable{
			{Name: "annotations", Expression: "has(" + ann + ") ? " + ann + " : {}"},
			{Name: "oldAnnotations", Expression: "request.operation == 'UPDATE' && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
		},
		Validations: []admissionregistrationv1.Validation{
			{
				Expression: "request.operation != 'UPDATE' || " + fixedList + ".all(k, (k in variables.annotations) == (k in variables.oldAnnotations) && (!(k in variables.annotations) || variables.annotations[k] == variables.oldAnnotations[k]))",
				Reason:     invalid,
				MessageExpression: "'metadata.annotations[' + " + fixedList + ".filter(k, (k in variables.annotations) != (k in variables.oldAnnotations) || ((k in variables.annotations) && variables.annotations[k] != variables.oldAnnotations[k]))[0] + " +
					cel("]: Forbidden: the pod annotations nicpool's admission resolves from ("+strings.Join(ImmutablePodAnnotations, ", ")+") cannot be added, changed or removed once the pod exists: admission resolved the pod's interfaces and pools from them when the pod was created. To change them, delete the pod and create it again with the new annotations (for a Deployment or StatefulSet, change its pod template)"),
			},
			{
				Expression:        onCreate + "!" + subnetList + ".exists(k, k in variables.annotations)",
				Reason:            invalid,
				MessageExpression: "'metadata.annotations[' + " + subnetList + ".filter(k, k in variables.annotations)[0] + " + cel("]: Forbidden: nicpool has no SpiderSubnet, so SpiderSubnet annotations (subnet, subnets, ippool-ip-number, ippool-reclaim) would be ignored and the pod would land in another pool; create a SpiderIPPool for the addresses and select it per interface with "+annotations.IPPools+`, e.g. [{"interface":"net1","ipv4":["pool-a"]}]`),
			},
			{
				Expression: onCreate + "!(" + cel(annotations.IPPool) + " in variables.annotations) || (" + cel(annotations.IPPools) + " in variables.annotations && variables.annotations[" + cel(annotations.IPPools) + "].matches(r'" + singleSelection + "'))",
				Reason:     invalid,
				Message:    "metadata.annotations[" + annotations.IPPool + "]: " + unresolved + " (it turns " + annotations.IPPool + " into an " + annotations.IPPools + " entry for " + annotations.DefaultInterface + ")",
			},
			{
				Expression: onCreate + "!(" + cel(annotations.IPPools) + " in variables.annotations) || (size(variables.annotations[" + cel(annotations.IPPools) + "]) <= " + fmt.Sprint(pod.MaxSelectionBytes) + " && variables.annotations[" + cel(annotations.IPPools) + "].matches(r'" + resolvedSelections + "'))",
				Reason:     invalid,
				Message:    "metadata.annotations[" + annotations.IPPools + "]: " + unresolved + " (every entry names its interface and concrete pools)",
			},
			{
				Expression: onCreate + "(" + sts + ") == (" + cel(annotations.EndpointUID) + " in variables.annotations)",
				Reason:     invalid,
				Message:    "metadata.annotations[" + annotations.EndpointUID + "]: " + unresolved + " (it stamps every StatefulSet pod, and no other)",
			},
		},
	}
}

// statefulSetOwnerCEL is crds/workload.StatefulSetOf's test of one owner reference:
// the controller, of kind StatefulSet in the apps group.
func statefulSetOwnerCEL(r string) string {
	return r + ".apiVersion.startsWith('apps/') && " + r + ".kind == 'StatefulSet' && has(" + r + ".controller) && " + r + ".controller"
}

func ptrTo[T any](v T) *T { return &v }
