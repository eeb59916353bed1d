package pod

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// stampEndpoint gives a StatefulSet pod the UID of the SpiderEndpoint of the same
// namespace/name — the only endpoint a node may take over for it — or
// annotations.NoEndpoint when there is none. Any other pod loses a stamp it carries:
// a stamp nicpool did not write could hand a node someone else's addresses. With
// StatefulSet addresses off (ipamconf), every StatefulSet pod gets NoEndpoint.
//
// The controller reference must name a StatefulSet that exists with that UID: a pod
// author can write any ownerReference on a bare pod, and would otherwise be stamped
// as that StatefulSet's ordinal and take over its endpoint's addresses.
func (a *Admission) stampEndpoint(ctx context.Context, pod *Pod, d *Decision, live *views.LiveReads) {
	current, stamped := pod.Annotations[annotations.EndpointUID]
	set, ok := workload.StatefulSetOf(pod.OwnerReferences)
	if !ok {
		if stamped {
			d.Remove = append(d.Remove, annotations.EndpointUID)
		}
		return
	}
	if !a.Switches.StatefulSets() {
		// StatefulSet addresses are off: the pod takes nothing over, whatever endpoint
		// its name has. It is still stamped, as nicpool's pod policy wants of every
		// StatefulSet pod, with the stamp that names no endpoint.
		if !stamped || current != annotations.NoEndpoint {
			d.Set = append(d.Set, Annotation{Key: annotations.EndpointUID, Value: annotations.NoEndpoint})
		}
		return
	}
	if a.StatefulSets != nil {
		var ref types.UID
		for _, r := range pod.OwnerReferences {
			if r.Controller != nil && *r.Controller {
				ref = r.UID
			}
		}
		uid, found, err := a.StatefulSets.UID(ctx, pod.Namespace, set, live)
		switch {
		case err != nil:
			d.Retry = fmt.Sprintf("StatefulSet %s/%s, this pod's controller, could not be read (%v); the StatefulSet controller retries by itself", pod.Namespace, set, err)
			return
		case !found || uid != ref:
			is := "namespace " + pod.Namespace + " has no StatefulSet " + set
			if found {
				is = fmt.Sprintf("StatefulSet %s/%s is UID %s", pod.Namespace, set, uid)
			}
			d.Errs = append(d.Errs, field.Forbidden(field.NewPath("metadata", "ownerReferences"),
				fmt.Sprintf("the pod names StatefulSet %s (UID %s) as its controller, but %s: only a StatefulSet's own pods take over the addresses of its SpiderEndpoints; remove the ownerReference, or let the StatefulSet create the pod", set, ref, is)))
			return
		}
	}
	want := annotations.NoEndpoint
	if e := a.Endpoints.Get(pod.Namespace, pod.Name); e != nil {
		if e.Terminating {
			d.Retry = fmt.Sprintf("SpiderEndpoint %s/%s of this StatefulSet pod is being deleted and its addresses released; the pod can be created once it is gone (the StatefulSet controller retries by itself)", e.Namespace, e.Name)
			return
		}
		if e.Problem != "" {
			d.Errs = append(d.Errs, field.Forbidden(field.NewPath("metadata", "name"),
				fmt.Sprintf("SpiderEndpoint %s/%s, whose addresses this StatefulSet pod would take over, is inconsistent: %s; delete it (kubectl delete spiderendpoint -n %s %s) so the pod starts with fresh addresses", e.Namespace, e.Name, e.Problem, e.Namespace, e.Name)))
			return
		}
		want = string(e.UID)
	}
	if !stamped || current != want {
		d.Set = append(d.Set, Annotation{Key: annotations.EndpointUID, Value: want})
	}
}
