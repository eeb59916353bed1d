package gc

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nicpool/nicpool/webhook/cachestrings"
)

// Pod is what the collector knows of a pod: its metadata (name, UID, owner
// references, deletion), its phase when it has finished, and its node when that node
// is not Ready. Those are the only cases the decision reads them in; the webhook
// caches every pod of the cluster as metadata alone (a few hundred bytes each, where
// a corev1.Pod is over a kilobyte even when empty), and finished pods in full.
type Pod struct {
	// ObjectMeta is the pod's metadata, shared and not copied: a pass holds one Pod
	// per pod of the cluster, and nothing of a pass modifies it.
	*metav1.ObjectMeta
	// Phase is Succeeded or Failed for a finished pod; otherwise it may be empty.
	Phase corev1.PodPhase
	// NodeName is set at least when the pod's node is not Ready.
	NodeName string
}

// PodOf is the collector's view of a whole pod.
func PodOf(p *corev1.Pod) Pod {
	return Pod{ObjectMeta: &p.ObjectMeta, Phase: p.Status.Phase, NodeName: p.Spec.NodeName}
}

// PodMetadata is the object the webhook's cache holds every pod as: its metadata only.
func PodMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
}

// podMetadataList lists pods as metadata.
func podMetadataList() *metav1.PartialObjectMetadataList {
	return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
}

// FinishedPods selects the pods that are neither Pending nor Running: those that
// Succeeded or Failed (and the rare Unknown). The collector watches them in full.
var FinishedPods = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodPending)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodRunning)),
)

// TransformPodMetadata is the cache transform for the webhook's pod metadata
// (PodMetadata): the collector reads name, namespace, UID, owner references and
// deletion timestamp; labels, annotations and managedFields are dropped. A few more
// small fields (creation, deletion grace, finalizers, resource version) stay, for logs
// and debugging.
//
// Whoever starts reading another pod field from the webhook's cache must keep it here.
func TransformPodMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		// Tombstones and anything else pass unchanged.
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: cachestrings.TypeMeta(m.TypeMeta), ObjectMeta: podMeta(&m.ObjectMeta)}, nil
}

// podMeta is the kept part of a pod's metadata, its strings laid out for a long stay
// in the cache (webhook/cachestrings).
func podMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Namespace:                  cachestrings.Shared(m.Namespace),
		Name:                       m.Name,
		UID:                        m.UID,
		ResourceVersion:            m.ResourceVersion,
		CreationTimestamp:          m.CreationTimestamp,
		DeletionTimestamp:          m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
		Finalizers:                 m.Finalizers,
	}
	cachestrings.OwnWithUID(&out.UID, &out.Name, &out.ResourceVersion)
	if len(m.OwnerReferences) > 0 {
		out.OwnerReferences = make([]metav1.OwnerReference, len(m.OwnerReferences))
		for i, r := range m.OwnerReferences {
			r.APIVersion, r.Kind = cachestrings.Shared(r.APIVersion), cachestrings.Shared(r.Kind)
			cachestrings.OwnWithUID(&r.UID, &r.Name)
			out.OwnerReferences[i] = r
		}
	}
	return out
}

// TransformPod is the cache transform for the finished pods the collector watches in
// full (FinishedPods): it keeps their metadata as TransformPodMetadata does, their
// node and their phase.
func TransformPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: podMeta(&pod.ObjectMeta),
		Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: pod.Status.Phase},
	}, nil
}

// TransformNode is the cache transform for nodes in the webhook's manager: the
// collector reads a node's name and Ready condition only, so a node costs a few
// hundred bytes instead of its images, addresses and capacity.
func TransformNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta:   node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion, DeletionTimestamp: node.DeletionTimestamp},
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out, nil
}
