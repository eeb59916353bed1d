package gc

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransformPod is the cache transform for pods in the webhook's manager. The collector
// is the only reader of cached pods there, and it reads name, namespace, UID, owner
// references, deletion timestamp and phase; everything else (containers, volumes,
// managedFields, conditions, container statuses, labels, annotations) is dropped, so
// that a cluster's pods cost a few hundred bytes each instead of several kilobytes.
// A few more small fields (node, creation, deletion grace, finalizers, resource
// version) stay, for logs and debugging.
//
// Whoever starts reading another pod field from the webhook's cache must keep it here.
func TransformPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		// Tombstones and anything else pass unchanged.
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:                  pod.Namespace,
			Name:                       pod.Name,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			OwnerReferences:            pod.OwnerReferences,
			Finalizers:                 pod.Finalizers,
		},
		Spec:   corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
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
