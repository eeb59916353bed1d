package configs

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
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
	PoolStatusPolicy = "spiderippool-status.nicpool.io"
	PodsPolicy       = "pods.nicpool.io"
	BlocksPolicy     = "ipblocks.nicpool.io"
)

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
func Policies(o Options) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	o = o.withDefaults()
	policies := []*admissionregistrationv1.ValidatingAdmissionPolicy{
		policy(EndpointsPolicy, endpointsSpec(o)),
		policy(PoolStatusPolicy, poolStatusSpec(o)),
		policy(PodsPolicy, podsSpec()),
		policy(BlocksPolicy, blocksSpec(o)),
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

// blocksSpec confines IPBlock writes as far as ipamd/ledger makes it sound.
//
// Who: nicpool's service accounts, a principal allowed OverrideVerb on ipblocks, or
// anyone whose update leaves spec and status alone (labels, the garbage collector
// orphaning a block of a deleted pool). DELETE is RBAC's alone.
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
	gr := ipamv1alpha1.GroupVersion.Group
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: constraints([]string{gr}, "ipblocks", admissionregistrationv1.ClusterScope,
			admissionregistrationv1.Create, admissionregistrationv1.Update),
		Variables: append(writerVariables(o),
			admissionregistrationv1.Variable{Name: "override", Expression: "authorizer.group(" + cel(gr) + ").resource('ipblocks').check(" + cel(OverrideVerb) + ").allowed()"},
			admissionregistrationv1.Variable{Name: "recordsKept", Expression: "request.operation == 'UPDATE' && object.spec == oldObject.spec && has(object.status) == has(oldObject.status) && (!has(object.status) || object.status == oldObject.status)"},
			admissionregistrationv1.Variable{Name: "newNode", Expression: node("object")},
			admissionregistrationv1.Variable{Name: "oldNode", Expression: "request.operation == 'UPDATE' ? " + node("oldObject") + " : ''"},
			admissionregistrationv1.Variable{Name: "empty", Expression: "!has(object.status) || !has(object.status.allocations) || size(object.status.allocations) == 0"},
		),
		Validations: []admissionregistrationv1.Validation{
			{
				Expression: "variables.nicpool || variables.override || variables.recordsKept",
				Reason:     forbidden,
				Message: fmt.Sprintf("IPBlocks are written only by nicpool's service accounts (%s and %s in namespace %s), or by whom RBAC allows the verb %q on ipblocks.%s (cluster-admin does): each record says which pod holds an address. Delete the pod to release its addresses",
					IpamdServiceAccount, WebhookServiceAccount, o.Namespace, OverrideVerb, gr),
			},
			{
				Expression: "!variables.ipamd || variables.node != ''",
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

func podsSpec() admissionregistrationv1.ValidatingAdmissionPolicySpec {
	ann := "object.metadata.annotations"
	subnets := make([]string, len(SpiderSubnetAnnotations))
	for i, k := range SpiderSubnetAnnotations {
		subnets[i] = cel(k)
	}
	subnetList := "[" + strings.Join(subnets, ", ") + "]"
	sts := "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, " + statefulSetOwnerCEL("r") + ")"
	unresolved := "is not as nicpool's mutating webhook leaves it: check that nicpool's MutatingWebhookConfiguration is installed and that no later webhook rewrites nicpool's annotations"
	invalid := ptrTo(metav1.StatusReasonInvalid)
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: constraints([]string{""}, "pods", admissionregistrationv1.NamespacedScope, admissionregistrationv1.Create),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name:       podConditionName,
			Expression: podCondition + " || (has(" + ann + ") && " + subnetList + ".exists(k, k in " + ann + "))",
		}},
		Variables: []admissionregistrationv1.Variable{
			{Name: "annotations", Expression: "has(" + ann + ") ? " + ann + " : {}"},
		},
		Validations: []admissionregistrationv1.Validation{
			{
				Expression:        "!" + subnetList + ".exists(k, k in variables.annotations)",
				Reason:            invalid,
				MessageExpression: "'metadata.annotations[' + " + subnetList + ".filter(k, k in variables.annotations)[0] + " + cel("]: Forbidden: nicpool has no SpiderSubnet, so SpiderSubnet annotations (subnet, subnets, ippool-ip-number, ippool-reclaim) would be ignored and the pod would land in another pool; create a SpiderIPPool for the addresses and select it per interface with "+annotations.IPPools+`, e.g. [{"interface":"net1","ipv4":["pool-a"]}]`),
			},
			{
				Expression: "!(" + cel(annotations.IPPool) + " in variables.annotations) || (" + cel(annotations.IPPools) + " in variables.annotations && variables.annotations[" + cel(annotations.IPPools) + "].matches(r'" + singleSelection + "'))",
				Reason:     invalid,
				Message:    "metadata.annotations[" + annotations.IPPool + "]: " + unresolved + " (it turns " + annotations.IPPool + " into an " + annotations.IPPools + " entry for " + annotations.DefaultInterface + ")",
			},
			{
				Expression: "!(" + cel(annotations.IPPools) + " in variables.annotations) || (size(variables.annotations[" + cel(annotations.IPPools) + "]) <= " + fmt.Sprint(pod.MaxSelectionBytes) + " && variables.annotations[" + cel(annotations.IPPools) + "].matches(r'" + resolvedSelections + "'))",
				Reason:     invalid,
				Message:    "metadata.annotations[" + annotations.IPPools + "]: " + unresolved + " (every entry names its interface and concrete pools)",
			},
			{
				Expression: "(" + sts + ") == (" + cel(annotations.EndpointUID) + " in variables.annotations)",
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
