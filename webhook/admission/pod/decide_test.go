package pod_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/admission/pod"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// offlineViews are views filled by hand: the decision as a plain function call.
func offlineViews() *views.All {
	v := views.New(nil)
	for _, p := range []v2beta1.SpiderIPPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "eth0-v4"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.10.0.0/24"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "eth0-v6"}, Spec: v2beta1.IPPoolSpec{Subnet: "fd00:10::/64"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "net1-v4"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.20.0.0/24"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "net1-v4-b"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.21.0.0/24"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "net2-v4"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.30.0.0/24", PodAffinity: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	} {
		v.Pools.Set(&p)
	}
	v.Namespaces.Set("default", nil)
	v.StatefulSets.Set("default", "db", "s")
	v.Endpoints.Set(&v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0", UID: "ep-uid-1"},
		Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: "p", IPs: []v2beta1.IPAllocationDetail{{Interface: "eth0", IPv4: ptr.To("10.10.0.5/24")}}}}})
	return v
}

func samplePod() *pod.Pod {
	return &pod.Pod{
		Namespace: "default", Name: "db-0",
		Labels: map[string]string{"app": "db"},
		Annotations: map[string]string{
			annotations.MultusNetworks: "macvlan-a, macvlan-b@data",
			annotations.IPPools:        `[{"ipv4":["eth0-v4"],"ipv6":["eth0-v6"]},{"ipv4":["net1-*"]},{"ipv4":["net2-v4"]}]`,
		},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "s", Controller: ptr.To(true)}},
	}
}

func TestDecideIsIdempotent(t *testing.T) {
	adm := pod.New(offlineViews())
	ctx := context.Background()
	p := samplePod()
	d := adm.Decide(ctx, p)
	if d.Denied() {
		t.Fatalf("denied: %v %s", d.Errs, d.Retry)
	}
	want := map[string]string{
		annotations.IPPools:     `[{"interface":"eth0","ipv4":["eth0-v4"],"ipv6":["eth0-v6"]},{"interface":"net1","ipv4":["net1-v4","net1-v4-b"]},{"interface":"data","ipv4":["net2-v4"]}]`,
		annotations.EndpointUID: "ep-uid-1",
	}
	if len(d.Set) != len(want) {
		t.Fatalf("set %v; want %v", d.Set, want)
	}
	for _, s := range d.Set {
		if want[s.Key] != s.Value {
			t.Errorf("%s = %s; want %s", s.Key, s.Value, want[s.Key])
		}
		p.Annotations[s.Key] = s.Value
	}
	if again := adm.Decide(ctx, p); again.Changed() || again.Denied() {
		t.Errorf("second decision changes %v / removes %v / denies %v; want nothing", again.Set, again.Remove, again.Errs)
	}
}

// The handler answers a second request for an admitted pod with no patch at all.
func TestHandlerSecondCallHasNoPatch(t *testing.T) {
	h := &pod.Handler{Admission: pod.New(offlineViews())}
	p := samplePod()
	k8sPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations, OwnerReferences: p.OwnerReferences}}
	resp := h.Handle(context.Background(), request(t, k8sPod))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("first call: allowed=%v patches=%v result=%v", resp.Allowed, resp.Patches, resp.Result)
	}
	raw, _ := json.Marshal(k8sPod)
	patched, err := applyPatch(raw, resp)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(patched, k8sPod); err != nil {
		t.Fatal(err)
	}
	resp = h.Handle(context.Background(), request(t, k8sPod))
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("second call: allowed=%v patches=%v; want allowed with no patch", resp.Allowed, resp.Patches)
	}
}

func request(t testing.TB, p *corev1.Pod) admission.Request {
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: p.Namespace, Name: p.Name,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

func applyPatch(raw []byte, resp admission.Response) ([]byte, error) {
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		return nil, err
	}
	return jsonPatch(raw, ops)
}

// Under dry-run the API server returns the mutated pod and stores nothing.
func TestDryRun(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "dryrun", nil)
	createPools(t, fixtures.Pool("d-v4", "10.91.0.0/24", []string{"10.91.0.10-10.91.0.20"}))
	p, err := createPod(ctx, newPod("dryrun", "p", map[string]string{annotations.IPPool: `{"ipv4":["d-v4"]}`}), dryRun)
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Annotations[annotations.IPPools]; v != `[{"interface":"eth0","ipv4":["d-v4"]}]` {
		t.Errorf("dry-run response has %s = %q", annotations.IPPools, v)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "dryrun", Name: "p"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run stored the pod: get returned %v", err)
	}
}

// Until its views are synced the webhook answers 503 (the API server fails the call
// and the creator retries) rather than denying pods for pools it has not seen yet.
func TestHandlerNotReady(t *testing.T) {
	h := &pod.Handler{Admission: pod.New(views.New(nil)), Ready: func() bool { return false }}
	p := samplePod()
	k := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Annotations: p.Annotations}}
	resp := h.Handle(context.Background(), request(t, k))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 503 {
		t.Errorf("not-ready answer: allowed=%v result=%+v; want a 503 error", resp.Allowed, resp.Result)
	}
}

// Decisions are memoized by annotation value; a value too long for the memo is
// decided all the same.
func TestLongAnnotation(t *testing.T) {
	adm := pod.New(offlineViews())
	names := make([]string, 0, 200)
	for range 200 {
		names = append(names, `"eth0-v4"`)
	}
	p := &pod.Pod{Namespace: "default", Name: "x", Annotations: map[string]string{annotations.IPPools: `[{"ipv4":[` + strings.Join(names, ",") + `]}]`}}
	d := adm.Decide(context.Background(), p)
	if !d.Denied() || !strings.Contains(d.Errs.ToAggregate().Error(), "Duplicate value") {
		t.Errorf("a long annotation listing one pool 200 times: %v", d.Errs)
	}
}
