package workload_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/workload"
)

func ref(apiVersion, kind, name string, controller *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u", Controller: controller}
}

func TestStatefulSetOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		want string
	}{
		{"apps/v1 controller", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", "db", ptr.To(true))}, "db"},
		{"another apps version", []metav1.OwnerReference{ref("apps/v1beta2", "StatefulSet", "db", ptr.To(true))}, "db"},
		{"owner but not controller", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", "db", ptr.To(false))}, ""},
		{"controller unset", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", "db", nil)}, ""},
		{"a CRD of the same kind", []metav1.OwnerReference{ref("apps.kruise.io/v1beta1", "StatefulSet", "db", ptr.To(true))}, ""},
		{"core group", []metav1.OwnerReference{ref("v1", "StatefulSet", "db", ptr.To(true))}, ""},
		{"malformed apiVersion", []metav1.OwnerReference{ref("apps/v1/x", "StatefulSet", "db", ptr.To(true))}, ""},
		{"ReplicaSet", []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", "db", ptr.To(true))}, ""},
		{"StatefulSet owner beside another controller", []metav1.OwnerReference{
			ref("apps/v1", "StatefulSet", "db", ptr.To(false)), ref("batch/v1", "Job", "j", ptr.To(true))}, ""},
		{"no owners", nil, ""},
		{"empty name", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", "", ptr.To(true))}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := workload.StatefulSetOf(tc.refs)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("StatefulSetOf = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestController(t *testing.T) {
	for _, tc := range []struct {
		name       string
		refs       []metav1.OwnerReference
		kind, ctrl string
	}{
		{"bare pod", nil, "Pod", "p"},
		{"StatefulSet", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", "db", ptr.To(true))}, "StatefulSet", "db"},
		{"ReplicaSet", []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", "rs", ptr.To(true))}, "ReplicaSet", "rs"},
		{"a CRD named StatefulSet", []metav1.OwnerReference{ref("apps.kruise.io/v1beta1", "StatefulSet", "db", ptr.To(true))}, "apps.kruise.io/v1beta1/StatefulSet", "db"},
		{"owner without controller", []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", "rs", nil)}, "Pod", "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, ctrl := workload.Controller("p", tc.refs)
			if kind != tc.kind || ctrl != tc.ctrl {
				t.Errorf("Controller = %q %q; want %q %q", kind, ctrl, tc.kind, tc.ctrl)
			}
		})
	}
}

func TestOrdinal(t *testing.T) {
	for _, tc := range []struct {
		set, pod string
		want     int
		ok       bool
	}{
		{"db", "db-0", 0, true},
		{"db", "db-12", 12, true},
		{"db-1", "db-1-3", 3, true},
		{"db", "db-1-3", 0, false}, // belongs to set "db-1"
		{"db", "db-01", 0, false},
		{"db", "db-00", 0, false},
		{"db", "db-+1", 0, false},
		{"db", "db--1", 0, false},
		{"db", "db-", 0, false},
		{"db", "db-1a", 0, false},
		{"db", "web-0", 0, false},
		{"db", "db0", 0, false},
		{"db", "db-99999999999999999999999", 0, false},
		{"", "-0", 0, false},
	} {
		got, ok := workload.Ordinal(tc.set, tc.pod)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Ordinal(%q, %q) = %d, %v; want %d, %v", tc.set, tc.pod, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSplitOrdinal(t *testing.T) {
	for _, tc := range []struct {
		pod, set string
		want     int
		ok       bool
	}{
		{"db-0", "db", 0, true},
		{"db-1-3", "db-1", 3, true},
		{"web-10", "web", 10, true},
		{"web-010", "", 0, false},
		{"web", "", 0, false},
		{"-3", "", 0, false},
		{"web-x", "", 0, false},
	} {
		set, n, ok := workload.SplitOrdinal(tc.pod)
		if set != tc.set || n != tc.want || ok != tc.ok {
			t.Errorf("SplitOrdinal(%q) = %q, %d, %v; want %q, %d, %v", tc.pod, set, n, ok, tc.set, tc.want, tc.ok)
		}
	}
}

func statefulSet(name string, replicas *int32, start *int32, deleting bool) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: appsv1.StatefulSetSpec{Replicas: replicas}}
	if start != nil {
		s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: *start}
	}
	if deleting {
		s.DeletionTimestamp = &metav1.Time{}
	}
	return s
}

func TestWillReturn(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *appsv1.StatefulSet
		pod  string
		want bool
	}{
		{"within replicas", statefulSet("db", ptr.To[int32](3), nil, false), "db-2", true},
		{"scaled away", statefulSet("db", ptr.To[int32](3), nil, false), "db-3", false},
		{"replicas default to 1", statefulSet("db", nil, nil, false), "db-0", true},
		{"replicas default to 1, ordinal 1", statefulSet("db", nil, nil, false), "db-1", false},
		{"zero replicas", statefulSet("db", ptr.To[int32](0), nil, false), "db-0", false},
		{"start shifts the range", statefulSet("db", ptr.To[int32](2), ptr.To[int32](5), false), "db-6", true},
		{"below start", statefulSet("db", ptr.To[int32](2), ptr.To[int32](5), false), "db-4", false},
		{"past start+replicas", statefulSet("db", ptr.To[int32](2), ptr.To[int32](5), false), "db-7", false},
		{"being deleted", statefulSet("db", ptr.To[int32](3), nil, true), "db-0", false},
		{"leading zero", statefulSet("db", ptr.To[int32](3), nil, false), "db-01", false},
		{"another set's pod", statefulSet("db", ptr.To[int32](3), nil, false), "dbx-0", false},
		{"no set", nil, "db-0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workload.WillReturn(tc.set, tc.pod); got != tc.want {
				t.Errorf("WillReturn = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestEndpointStatefulSet(t *testing.T) {
	ep := func(kind, name string) *v2beta1.SpiderEndpoint {
		return &v2beta1.SpiderEndpoint{Status: v2beta1.WorkloadEndpointStatus{OwnerControllerType: kind, OwnerControllerName: name}}
	}
	if set, ok := workload.EndpointStatefulSet(ep("StatefulSet", "db")); !ok || set != "db" {
		t.Errorf("StatefulSet endpoint: %q %v", set, ok)
	}
	for _, e := range []*v2beta1.SpiderEndpoint{nil, ep("Pod", "db"), ep("StatefulSet", ""), ep("apps.kruise.io/v1beta1/StatefulSet", "db")} {
		if set, ok := workload.EndpointStatefulSet(e); ok {
			t.Errorf("endpoint %+v names StatefulSet %q", e, set)
		}
	}
}
