// Package workload is nicpool's one answer to "is this a StatefulSet pod, which
// ordinal, will it come back", shared by the pod webhook, ipamd and the garbage
// collector so that they never disagree on whose addresses stay reserved.
package workload

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// KindStatefulSet is the kind a StatefulSet pod's SpiderEndpoint records in
// status.ownerControllerType (spiderpool's convention).
const KindStatefulSet = "StatefulSet"

// StatefulSetOf returns the name of the StatefulSet controlling a pod with these owner
// references: the controller reference of kind StatefulSet in the apps API group (any
// version). A StatefulSet kind of another group (a CRD) is not one.
func StatefulSetOf(refs []metav1.OwnerReference) (string, bool) {
	for _, r := range refs {
		if r.Controller == nil || !*r.Controller {
			continue
		}
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err == nil && gv.Group == appsv1.GroupName && r.Kind == KindStatefulSet && r.Name != "" {
			return r.Name, true
		}
		return "", false // one controller at most; it is another one
	}
	return "", false
}

// Controller returns the kind and name of a pod's controller as a SpiderEndpoint
// records them (status.ownerControllerType and ownerControllerName): "Pod" and the
// pod's own name for a pod without controller, as spiderpool writes it.
func Controller(name string, refs []metav1.OwnerReference) (kind, controller string) {
	if set, ok := StatefulSetOf(refs); ok {
		return KindStatefulSet, set
	}
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			if r.Kind == KindStatefulSet {
				// Not an apps StatefulSet: never recorded as one, so that nothing takes
				// it for a pod that comes back.
				return r.APIVersion + "/" + r.Kind, r.Name
			}
			return r.Kind, r.Name
		}
	}
	return "Pod", name
}

// EndpointStatefulSet returns the StatefulSet a SpiderEndpoint says its pod belongs to.
func EndpointStatefulSet(ep *v2beta1.SpiderEndpoint) (string, bool) {
	if ep == nil || ep.Status.OwnerControllerType != KindStatefulSet || ep.Status.OwnerControllerName == "" {
		return "", false
	}
	return ep.Status.OwnerControllerName, true
}

// Ordinal returns the ordinal of pod podName of StatefulSet set: the name must be
// exactly "<set>-<n>" with n written as the StatefulSet controller writes it (decimal
// digits, no sign, no leading zero).
func Ordinal(set, podName string) (int, bool) {
	digits, ok := strings.CutPrefix(podName, set+"-")
	if !ok || set == "" {
		return 0, false
	}
	return parseOrdinal(digits)
}

// SplitOrdinal splits a pod name "<set>-<n>" at its last dash into the StatefulSet it
// would belong to and its ordinal; false when the name has no ordinal of that form.
func SplitOrdinal(podName string) (set string, ordinal int, ok bool) {
	i := strings.LastIndexByte(podName, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, ok := parseOrdinal(podName[i+1:])
	if !ok {
		return "", 0, false
	}
	return podName[:i], n, true
}

func parseOrdinal(digits string) (int, bool) {
	if digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Replicas is spec.replicas, 1 when unset (the API server's default).
func Replicas(set *appsv1.StatefulSet) int32 {
	if set.Spec.Replicas == nil {
		return 1
	}
	return *set.Spec.Replicas
}

// Start is spec.ordinals.start, 0 when unset.
func Start(set *appsv1.StatefulSet) int32 {
	if set.Spec.Ordinals == nil {
		return 0
	}
	return set.Spec.Ordinals.Start
}

// Wants reports whether the StatefulSet keeps (or will create again) the pod of that
// ordinal: it is not being deleted and the ordinal is in [start, start+replicas).
func Wants(set *appsv1.StatefulSet, ordinal int) bool {
	if set == nil || set.DeletionTimestamp != nil {
		return false
	}
	start := int64(Start(set))
	return int64(ordinal) >= start && int64(ordinal) < start+int64(Replicas(set))
}

// WillReturn reports whether the pod named podName comes back as a pod of set: its
// name is one of set's ordinals and set wants that ordinal.
func WillReturn(set *appsv1.StatefulSet, podName string) bool {
	if set == nil {
		return false
	}
	n, ok := Ordinal(set.Name, podName)
	return ok && Wants(set, n)
}
