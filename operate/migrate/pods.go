package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	podwebhook "github.com/nicpool/nicpool/webhook/admission/pod"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// PodChange is what the migration writes on a running pod: the annotations nicpool's
// pod webhook would have set had it admitted the pod (every ipam.spidernet.io/ippools
// entry naming its interface and concrete pools, ipam.spidernet.io/ippool turned into
// such an entry, a StatefulSet pod's endpoint stamp). ipamd answers a pod's CNI ADD
// only from a selection admission resolved, so without this a pod created under
// spiderpool could not restart its sandbox.
type PodChange struct {
	// Pod is namespace/name.
	Pod    string            `json:"pod"`
	UID    string            `json:"uid"`
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// admitter is the admission decision over the views of what the migration read.
type admitter struct {
	admission *podwebhook.Admission
	excluded  map[string]bool
}

// newAdmitter feeds the webhook's admission views from the inputs, as the webhook's
// informers feed them from the cluster, and returns THE admission decision over them.
// Nothing is read beyond the inputs.
func newAdmitter(in Inputs, sw ipamconf.Switches) *admitter {
	v := views.New(nil)
	for _, p := range in.Pools {
		v.Pools.Set(p.Object)
	}
	for i := range in.Endpoints {
		v.Endpoints.Set(&in.Endpoints[i])
	}
	for _, ns := range in.Namespaces {
		v.Namespaces.Set(ns.Name, ns.Labels)
	}
	for i := range in.Networks {
		v.Networks.Set(&in.Networks[i])
	}
	a := &admitter{admission: podwebhook.New(v), excluded: map[string]bool{}}
	// spiderpool's switches, as nicpool's webhook will run with them.
	a.admission.Switches = sw
	// The pods it decides for are running: their controllers were checked when they
	// were created, and the migration reads no StatefulSets.
	a.admission.StatefulSets = nil
	for _, ns := range (configs.Options{}).ExcludedNamespaces() {
		a.excluded[ns] = true
	}
	return a
}

// decide returns the admission decision for a running pod, and whether the webhook
// would see the pod at all: not a pod of a namespace the webhooks skip, nor one that
// is finished or being deleted (it never has another ADD).
func (a *admitter) decide(ctx context.Context, p *corev1.Pod) (podwebhook.Decision, bool) {
	if a.excluded[p.Namespace] || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return podwebhook.Decision{}, false
	}
	return a.admission.Decide(ctx, &podwebhook.Pod{
		Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations, OwnerReferences: p.OwnerReferences,
	}), true
}

// resolvePods decides, for every pod the webhook would see, the annotations to write,
// and warns of each pod that admission would refuse: such a pod keeps running with its
// addresses, but its next ADD fails until it is recreated.
func (a *admitter) resolvePods(ctx context.Context, pods []corev1.Pod) ([]PodChange, []Problem) {
	var changes []PodChange
	var warnings []Problem
	for i := range pods {
		p := &pods[i]
		d, seen := a.decide(ctx, p)
		if !seen {
			continue
		}
		name := p.Namespace + "/" + p.Name
		for _, w := range d.Warnings {
			warnings = append(warnings, Problem{Message: "pod " + name + ": " + w})
		}
		if d.Denied() {
			warnings = append(warnings, Problem{
				Message: fmt.Sprintf("pod %s: nicpool's admission would refuse it (%s): it keeps running as it is, but nicpool's CNI plugin refuses its next ADD (a sandbox restart)", name, refusal(d)),
				Fix:     fmt.Sprintf("correct its owner's pod template, then, once nicpool runs: kubectl delete pod -n %s %s", p.Namespace, p.Name),
			})
			continue
		}
		if d.Changed() {
			changes = append(changes, change(p, d))
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Pod < changes[j].Pod })
	return changes, warnings
}

func refusal(d podwebhook.Decision) string {
	if d.Retry != "" {
		return d.Retry
	}
	return d.Errs.ToAggregate().Error()
}

func change(p *corev1.Pod, d podwebhook.Decision) PodChange {
	c := PodChange{Pod: p.Namespace + "/" + p.Name, UID: string(p.UID), Remove: d.Remove}
	if len(d.Set) > 0 {
		c.Set = map[string]string{}
		for _, s := range d.Set {
			c.Set[s.Key] = s.Value
		}
	}
	return c
}

// maxPodAttempts bounds the writes of one pod's annotations when the pod keeps changing
// (its kubelet writes its status).
const maxPodAttempts = 5

// applyPod writes a planned change on the pod as it is now: the decision is made again
// on a fresh read, and written only if the pod did not change meanwhile (its
// resourceVersion), so that nothing another writer set is lost. A pod that is gone,
// or replaced by another of the same name, is left alone.
func (a *admitter) applyPod(ctx context.Context, c client.Client, planned PodChange, log logr.Logger) error {
	ns, name, _ := strings.Cut(planned.Pod, "/")
	for range maxPodAttempts {
		p := &corev1.Pod{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
		if apierrors.IsNotFound(err) || (err == nil && string(p.UID) != planned.UID) {
			log.Info("pod gone since the plan was made; left alone", "pod", planned.Pod)
			return nil
		}
		if err != nil {
			return err
		}
		d, seen := a.decide(ctx, p)
		if !seen || d.Denied() || !d.Changed() {
			return nil
		}
		set := map[string]any{}
		for _, s := range d.Set {
			set[s.Key] = s.Value
		}
		for _, k := range d.Remove {
			set[k] = nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": p.ResourceVersion, "annotations": set}})
		err = c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager))
		switch {
		case err == nil:
			log.Info("resolved the pod's pool selection as nicpool's admission would", "pod", planned.Pod, "set", d.Set, "remove", d.Remove)
			return nil
		case !apierrors.IsConflict(err):
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("it kept changing while its annotations were written: run the migration again")
}
