// Package configs builds nicpool's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration as Go values: the one source for the manifests, the
// self-managed certificate mode's caBundle injection and the tests, which register
// exactly these objects with a real API server.
package configs

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// Names of the two configurations.
const (
	MutatingName   = "nicpool-mutating"
	ValidatingName = "nicpool-validating"
)

// Paths the webhook server serves, one per webhook.
const (
	MutatePodPath          = "/mutate-pod"
	MutatePoolPath         = "/mutate-spiderippool"
	ValidatePoolPath       = "/validate-spiderippool"
	MutateReservedIPPath   = "/mutate-spiderreservedip"
	ValidateReservedIPPath = "/validate-spiderreservedip"
	DefaultNamespace       = "nicpool-system"
	DefaultServiceName     = "nicpool-webhook"
	DefaultTimeoutSeconds  = 3
	namespaceNameLabel     = "kubernetes.io/metadata.name"
	defaultServicePort     = 443
)

// The pod webhooks' match condition: a pod reaches them when it selects pools by
// annotation, carries nicpool's endpoint stamp (kept only if nicpool wrote it), or is
// controlled by a StatefulSet (whose addresses must stick whatever picks its pools, so
// every such pod is stamped). Any other pod never depends on the webhook being up.
const podConditionName = "pod-uses-nicpool-admission"

var podCondition = "(has(object.metadata.annotations) && (" +
	"'" + annotations.IPPools + "' in object.metadata.annotations || " +
	"'" + annotations.IPPool + "' in object.metadata.annotations || " +
	"'" + annotations.EndpointUID + "' in object.metadata.annotations)) || " +
	"(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, " + statefulSetOwnerCEL("r") + "))"

// Options say where the webhook server is reached.
type Options struct {
	// Namespace is nicpool's namespace: its Service lives there, and no webhook
	// applies to objects in it (nicpool must be able to start its own pods).
	Namespace string
	// ServiceName is the webhook Service.
	ServiceName string
	// ServicePort is the Service port; 443 when zero.
	ServicePort int32
	// CABundle is the PEM CA that signed the serving certificate; empty when a
	// certificate controller injects it later.
	CABundle []byte
	// TimeoutSeconds bounds each call; DefaultTimeoutSeconds when zero.
	TimeoutSeconds int32
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.ServicePort == 0 {
		o.ServicePort = defaultServicePort
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = DefaultTimeoutSeconds
	}
	return o
}

// ExcludedNamespaces are the namespaces no webhook applies to.
func (o Options) ExcludedNamespaces() []string {
	return []string{"kube-system", o.withDefaults().Namespace}
}

// namespaceSelector selects every namespace but the excluded ones.
func (o Options) namespaceSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: o.ExcludedNamespaces(),
	}}}
}

// Configurations returns nicpool's webhook configurations. Every webhook fails
// closed (failurePolicy Fail) with a short timeout and no side effects; namespaced
// objects in kube-system and nicpool's namespace are never sent; and only pods that
// select pools by annotation or are StatefulSet pods reach the pod webhooks (a CEL
// match condition), so the rest of the cluster's pods do not depend on nicpool being
// up.
func Configurations(o Options) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	o = o.withDefaults()
	nsSelector := o.namespaceSelector()
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		p := path
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: o.ServiceName, Path: &p, Port: &o.ServicePort},
			CABundle: o.CABundle,
		}
	}
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	equivalent := admissionregistrationv1.Equivalent
	timeout := o.TimeoutSeconds
	podMatch := []admissionregistrationv1.MatchCondition{{Name: podConditionName, Expression: podCondition}}
	podRules := rules([]string{""}, "v1", "pods", admissionregistrationv1.NamespacedScope, admissionregistrationv1.Create)
	group := []string{v2beta1.GroupVersion.Group}
	version := v2beta1.GroupVersion.Version
	mutating := func(name, path string, r []admissionregistrationv1.RuleWithOperations, mc []admissionregistrationv1.MatchCondition) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name: name, ClientConfig: client(path), Rules: r, FailurePolicy: &fail, MatchPolicy: &equivalent,
			NamespaceSelector: nsSelector.DeepCopy(), SideEffects: &none, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: &ifNeeded, MatchConditions: mc,
		}
	}
	validating := func(name, path string, r []admissionregistrationv1.RuleWithOperations, mc []admissionregistrationv1.MatchCondition) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: client(path), Rules: r, FailurePolicy: &fail, MatchPolicy: &equivalent,
			NamespaceSelector: nsSelector.DeepCopy(), SideEffects: &none, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"}, MatchConditions: mc,
		}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: MutatingName, Labels: map[string]string{"app.kubernetes.io/part-of": "nicpool"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			mutating("pods.nicpool.io", MutatePodPath, podRules, podMatch),
			mutating("spiderippools.nicpool.io", MutatePoolPath, rules(group, version, "spiderippools", admissionregistrationv1.ClusterScope, admissionregistrationv1.Create, admissionregistrationv1.Update), nil),
			mutating("spiderreservedips.nicpool.io", MutateReservedIPPath, rules(group, version, "spiderreservedips", admissionregistrationv1.ClusterScope, admissionregistrationv1.Create, admissionregistrationv1.Update), nil),
		},
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingName, Labels: map[string]string{"app.kubernetes.io/part-of": "nicpool"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validating("spiderippools.nicpool.io", ValidatePoolPath, rules(group, version, "spiderippools", admissionregistrationv1.ClusterScope, admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete), nil),
			validating("spiderreservedips.nicpool.io", ValidateReservedIPPath, rules(group, version, "spiderreservedips", admissionregistrationv1.ClusterScope, admissionregistrationv1.Create, admissionregistrationv1.Update), nil),
		},
	}
	return m, v
}

func rules(groups []string, version, resource string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	s := scope
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule:       admissionregistrationv1.Rule{APIGroups: groups, APIVersions: []string{version}, Resources: []string{resource}, Scope: &s},
	}}
}
