package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/scheme"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/metrics"
	"github.com/nicpool/nicpool/webhook/admission/pod"
	"github.com/nicpool/nicpool/webhook/admission/pool"
	"github.com/nicpool/nicpool/webhook/admission/views"
	"github.com/nicpool/nicpool/webhook/controller/capacity"
	"github.com/nicpool/nicpool/webhook/controller/poolcount"
)

// Webhook names as the metrics label them.
const (
	MutatePod          = "mutate-pod"
	MutatePool         = "mutate-spiderippool"
	ValidatePool       = "validate-spiderippool"
	MutateReservedIP   = "mutate-spiderreservedip"
	ValidateReservedIP = "validate-spiderreservedip"
)

// Permissions of the admission webhooks and the pool counts controller (the garbage
// collector, certs and leader election declare their own).
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=spiderpool.spidernet.io,resources=spiderippools,verbs=get;list;watch
// +kubebuilder:rbac:groups=spiderpool.spidernet.io,resources=spiderippools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.nicpool.io,resources=ipblocks,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=spiderpool.spidernet.io,resources=spiderendpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=spiderpool.spidernet.io,resources=spiderreservedips,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch

// NewScheme returns the scheme nicpool's webhook serves: core Kubernetes types,
// spiderpool.spidernet.io/v2beta1, nicpool's ipam.nicpool.io/v1alpha1 and Multus'
// NetworkAttachmentDefinitions.
func NewScheme() *runtime.Scheme { return scheme.New(nadv1.AddToScheme) }

// Options tune admission.
type Options struct {
	// ClusterNetworkNicpool says that nicpool is the IPAM of the cluster network (the
	// pods' eth0): admission then warns of a pod whose ippools leave eth0 out.
	ClusterNetworkNicpool bool
	// RefusePoolDeleteWhileAllocated refuses the DELETE of a pool that still holds
	// addresses. Off, a DELETE is accepted as spiderpool accepts it, and the pool's
	// finalizer keeps the pool, serving nothing new, until its last address is released.
	RefusePoolDeleteWhileAllocated bool
	// Switches are spiderpool-conf's IPAM switches: a pool or reservation of a
	// disabled family is refused, a pod's pool list of a disabled family is left out,
	// and with StatefulSet addresses off no pod is stamped to take an endpoint over.
	Switches ipamconf.Switches
}

// Setup registers every nicpool webhook on the manager's webhook server, feeds the
// admission views from the manager's cache, adds the pool counts controller and
// the pool capacity gauges, and adds readiness checks that pass once the views are
// synced and the webhook server serves. It returns the views.
func Setup(ctx context.Context, mgr manager.Manager, o Options) (*views.All, error) {
	v := views.New(mgr.GetAPIReader())
	// NetworkAttachmentDefinitions are read when the cluster has them (Multus);
	// a cluster that gains the CRD later needs the webhook restarted to use them.
	_, err := mgr.GetRESTMapper().RESTMapping(nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinition").GroupKind(), nadv1.SchemeGroupVersion.Version)
	if err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("look up NetworkAttachmentDefinitions: %w", err)
	}
	if err := v.Register(ctx, mgr.GetCache(), err == nil); err != nil {
		return nil, fmt.Errorf("admission views: %w", err)
	}
	srv := mgr.GetWebhookServer()
	register := func(path, name string, h admission.Handler) {
		srv.Register(path, &admission.Webhook{Handler: metrics.Instrument(name, h)})
	}
	adm := pod.New(v)
	adm.ClusterNetworkNicpool = o.ClusterNetworkNicpool
	adm.Switches = o.Switches
	register(configs.MutatePodPath, MutatePod, &pod.Handler{Admission: adm, Ready: v.Synced})

	scheme := mgr.GetScheme()
	register(configs.MutatePoolPath, MutatePool, admission.WithDefaulter[*v2beta1.SpiderIPPool](scheme, pool.Defaulter{}).Handler)
	register(configs.ValidatePoolPath, ValidatePool, admission.WithValidator[*v2beta1.SpiderIPPool](scheme, &pool.Validator{Reader: mgr.GetAPIReader(), RefuseDeleteWhileAllocated: o.RefusePoolDeleteWhileAllocated, Switches: o.Switches}).Handler)
	// Earlier releases registered webhooks on these paths; their checks are now
	// ValidatingAdmissionPolicies (configs.Policies). Until an upgrade has replaced the
	// old ValidatingWebhookConfiguration, the API server may still call them: admit.
	for _, path := range []string{"/validate-pod", "/validate-spiderendpoint"} {
		srv.Register(path, &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("checked by nicpool's ValidatingAdmissionPolicies")
		})})
	}
	register(configs.MutateReservedIPPath, MutateReservedIP, admission.WithDefaulter[*v2beta1.SpiderReservedIP](scheme, pool.ReservedDefaulter{}).Handler)
	register(configs.ValidateReservedIPPath, ValidateReservedIP, admission.WithValidator[*v2beta1.SpiderReservedIP](scheme, pool.ReservedValidator{Switches: o.Switches}).Handler)
	counts := ledger.New(ledger.Options{Cache: mgr.GetClient(), Client: mgr.GetClient(), Fresh: mgr.GetAPIReader(), Log: mgr.GetLogger().WithName("ledger")})
	if err := poolcount.NewCounter(counts).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("pool counts controller: %w", err)
	}
	if err := capacity.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("pool capacity gauges: %w", err)
	}

	if err := mgr.AddReadyzCheck("admission-views", func(*http.Request) error {
		if !v.Synced() {
			return errors.New("views of pools, namespaces and endpoints not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook-server", srv.StartedChecker()); err != nil {
		return nil, err
	}
	return v, nil
}
