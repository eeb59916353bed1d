package migrate

import (
	"context"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/served"
	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// spiderpool's components, by the last element of their image's repository.
var spiderpoolImages = []string{"spiderpool-agent", "spiderpool-controller"}

// Kinds of spiderpool that nicpool does not serve.
var unsupportedKinds = []string{"SpiderSubnet", "SpiderMultusConfig"}

// Preflight finds what must change before --apply may write (spiderpool still
// running, nicpool's admission policy on pool status already installed, objects that
// deleting spiderpool's CRDs would take with them, KubeVirt VM addresses) and what an operator should know (objects of kinds nicpool does not
// serve). pods and endpoints are those Read returned; disc says which kinds the API
// server serves.
func Preflight(ctx context.Context, r client.Reader, disc discovery.ServerResourcesInterface, in Inputs) (blockers, warnings []Problem, err error) {
	blockers = append(blockers, runningPods(in.Pods)...)
	webhooks, err := spiderpoolWebhooks(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	blockers = append(blockers, webhooks...)
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	switch err := r.Get(ctx, client.ObjectKey{Name: configs.PoolStatusPolicy}, binding); {
	case err == nil:
		blockers = append(blockers, Problem{
			Message: fmt.Sprintf("nicpool is installed already: its ValidatingAdmissionPolicyBinding %s lets only nicpool's service accounts write pool status, which the migration writes; migrate first, then install nicpool", configs.PoolStatusPolicy),
			Fix:     "kubectl delete validatingadmissionpolicybinding " + configs.PoolStatusPolicy + " (installing nicpool again restores it)",
		})
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return nil, nil, fmt.Errorf("read ValidatingAdmissionPolicyBinding %s: %w", configs.PoolStatusPolicy, err)
	}
	for _, p := range in.Pools {
		blockers = append(blockers, ownedBySpiderpool("spiderippool", "", p.Object.Name, p.Object.OwnerReferences)...)
	}
	for _, n := range in.Networks {
		blockers = append(blockers, ownedBySpiderpool("network-attachment-definition", n.Namespace, n.Name, n.OwnerReferences)...)
	}
	blockers = append(blockers, virtualMachines(in.Endpoints)...)
	srv, err := coordinator.Discover(disc)
	if err != nil {
		return nil, nil, err
	}
	coords := &v2beta1.SpiderCoordinatorList{}
	if srv.SpiderCoordinators {
		if err := r.List(ctx, coords); err != nil {
			return nil, nil, fmt.Errorf("list spidercoordinators: %w", err)
		}
	}
	blockers = append(blockers, coordinatorProblems(in.Networks, coords.Items, srv)...)
	for _, kind := range unsupportedKinds {
		switch ok, err := served.Resource(disc, v2beta1.GroupVersion, strings.ToLower(kind)+"s"); {
		case err != nil:
			return nil, nil, err
		case !ok: // no such CRD (any more)
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(v2beta1.GroupVersion.WithKind(kind + "List"))
		if err := r.List(ctx, list); err != nil {
			return nil, nil, fmt.Errorf("list %ss: %w", kind, err)
		}
		if len(list.Items) > 0 {
			warnings = append(warnings, Problem{Message: fmt.Sprintf("%d %s objects: nicpool does not serve %ss; they stay as they are and nothing acts on them", len(list.Items), kind, kind)})
		}
	}
	return blockers, warnings, nil
}

// runningPods finds spiderpool's agents and controllers still running.
func runningPods(pods []corev1.Pod) []Problem {
	var out []Problem
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			if component := spiderpoolComponent(c.Image); component != "" {
				out = append(out, Problem{
					Message: fmt.Sprintf("%s still runs: pod %s/%s on node %s", component, p.Namespace, p.Name, p.Spec.NodeName),
					Fix:     "uninstall spiderpool, keeping its CRDs: helm uninstall <release> -n <namespace> --no-hooks (docs/migrate-from-spiderpool.md)",
				})
				break
			}
		}
	}
	return out
}

// spiderpoolComponent returns which spiderpool component an image is, or "".
func spiderpoolComponent(image string) string {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	last := repo[strings.LastIndex(repo, "/")+1:]
	for _, c := range spiderpoolImages {
		if last == c {
			return c
		}
	}
	return ""
}

// spiderpoolWebhooks finds spiderpool's admission webhooks still registered: they
// would refuse or rewrite what nicpool writes.
func spiderpoolWebhooks(ctx context.Context, r client.Reader) ([]Problem, error) {
	var out []Problem
	check := func(kind, name string, hooks []string) {
		for _, h := range hooks {
			if strings.HasSuffix(h, ".spiderpool.spidernet.io") || strings.HasPrefix(name, "spiderpool") {
				out = append(out, Problem{
					Message: fmt.Sprintf("spiderpool's webhook %s of %s %s is still registered", h, kind, name),
					Fix:     fmt.Sprintf("kubectl delete %s %s", strings.ToLower(kind), name),
				})
				return
			}
		}
	}
	var mutating admissionv1.MutatingWebhookConfigurationList
	if err := r.List(ctx, &mutating); err != nil {
		return nil, fmt.Errorf("list MutatingWebhookConfigurations: %w", err)
	}
	for _, c := range mutating.Items {
		var names []string
		for _, w := range c.Webhooks {
			names = append(names, w.Name)
		}
		check("MutatingWebhookConfiguration", c.Name, names)
	}
	var validating admissionv1.ValidatingWebhookConfigurationList
	if err := r.List(ctx, &validating); err != nil {
		return nil, fmt.Errorf("list ValidatingWebhookConfigurations: %w", err)
	}
	for _, c := range validating.Items {
		var names []string
		for _, w := range c.Webhooks {
			names = append(names, w.Name)
		}
		check("ValidatingWebhookConfiguration", c.Name, names)
	}
	return out, nil
}

// ownedBySpiderpool finds an object that the garbage collector would delete with the
// spiderpool object owning it (a SpiderMultusConfig's NAD, a SpiderSubnet's pool).
func ownedBySpiderpool(resource, namespace, name string, refs []metav1.OwnerReference) []Problem {
	for _, ref := range refs {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != v2beta1.GroupVersion.Group {
			continue
		}
		ns := ""
		if namespace != "" {
			ns = " -n " + namespace
		}
		return []Problem{{
			Message: fmt.Sprintf("%s %s is owned by %s %s: deleting it, or spiderpool's CRDs, deletes this object too", resource, qualified(namespace, name), ref.Kind, ref.Name),
			Fix:     fmt.Sprintf(`kubectl patch %s%s %s --type json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]'`, resource, ns, name),
		}}
	}
	return nil
}

// virtualMachines finds the endpoints spiderpool keeps for KubeVirt VMs: named after
// the VM, not its pod, they keep a VM's address across its pods, which nicpool does not.
func virtualMachines(eps []v2beta1.SpiderEndpoint) []Problem {
	var out []Problem
	for _, ep := range eps {
		if strings.Contains(ep.Status.OwnerControllerType, "VirtualMachine") {
			out = append(out, Problem{
				Message: fmt.Sprintf("SpiderEndpoint %s/%s keeps the addresses of KubeVirt %s %s, which nicpool does not support", ep.Namespace, ep.Name, ep.Status.OwnerControllerType, ep.Status.OwnerControllerName),
				Fix:     fmt.Sprintf("stop the VM (virtctl stop -n %s %s) and delete this endpoint (kubectl delete spiderendpoint -n %s %s); it gets a new address from nicpool when it starts", ep.Namespace, ep.Status.OwnerControllerName, ep.Namespace, ep.Name),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Message < out[j].Message })
	return out
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
