package pod

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/workload"
)

// stampEndpoint gives a StatefulSet pod the UID of the SpiderEndpoint of the same
// namespace/name — the only endpoint a node may take over for it — or
// annotations.NoEndpoint when there is none. Any other pod loses a stamp it carries:
// a stamp nicpool did not write could hand a node someone else's addresses.
func (a *Admission) stampEndpoint(pod *Pod, d *Decision) {
	current, stamped := pod.Annotations[annotations.EndpointUID]
	if _, ok := workload.StatefulSetOf(pod.OwnerReferences); !ok {
		if stamped {
			d.Remove = append(d.Remove, annotations.EndpointUID)
		}
		return
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
