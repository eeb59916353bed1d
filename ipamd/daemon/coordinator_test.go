package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

// askCoordinator asks as spiderpool's coordinator plugin does: GET with the pod's
// names as a JSON body on the agent's socket. It returns the status and the body.
func askCoordinator(t *testing.T, socket string, body []byte) (int, []byte) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequest(http.MethodGet, "http://spiderpool"+coordinator.Path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func podArgs(ns, name string) []byte {
	b, _ := json.Marshal(map[string]string{"podNamespace": ns, "podName": name})
	return b
}

// TestCoordinatorIsAnsweredFromTheSpiderCoordinatorAndThePod runs ipamd with the
// socket spiderpool's agent served and asks it what spiderpool's coordinator plugin
// asks: the answer follows the SpiderCoordinator (with the CRD's defaults), the
// cluster's ServiceCIDRs and the pod's default-route-nic annotation, and every
// hostile or unservable input is refused with spiderpool's failure (500, a JSON
// string) naming the field.
func TestCoordinatorIsAnsweredFromTheSpiderCoordinatorAndThePod(t *testing.T) {
	ctx := context.Background()
	socket := filepath.Join(t.TempDir(), "spiderpool.sock")
	startDaemonWith(t, "coord-node", func(o *daemon.Options) { o.SpiderpoolSocketPath = socket })
	createNamespace(t, "coord")
	createPod(t, "coord", "web", "coord-node", withAnnotations(coordinator.DefaultRouteNICAnnotation, "net1"))
	other := createPod(t, "coord", "elsewhere", "coord-other")
	bad := createPod(t, "coord", "bad-nic", "coord-node", withAnnotations(coordinator.DefaultRouteNICAnnotation, "net1/../eth0"))

	refused := func(what string, body []byte, want ...string) {
		t.Helper()
		fixtures.Eventually(t, what, func() (bool, string) {
			status, b := askCoordinator(t, socket, body)
			var msg string
			if status != http.StatusInternalServerError || json.Unmarshal(b, &msg) != nil {
				return false, fmt.Sprintf("status %d, body %s", status, b)
			}
			for _, w := range want {
				if !strings.Contains(msg, w) {
					return false, msg
				}
			}
			return true, ""
		})
	}
	refused("no SpiderCoordinator", podArgs("coord", "web"), "no SpiderCoordinator")

	coord := &v2beta1.SpiderCoordinator{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v2beta1.CoordinatorSpec{
			Mode:         ptr("underlay"),
			PodCIDRType:  ptr("none"),
			HijackCIDR:   []string{"169.254.0.0/16", "10.96.7.7"},
			PolicyRoutes: []v2beta1.CoordinatorRoute{{Dst: "192.0.2.0/24", Gw: "10.10.0.1"}},
			PodMACPrefix: ptr("0a:1b"),
		},
	}
	if err := env.Client.Create(ctx, coord); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), coord) })

	if !servesServiceCIDRs(t) {
		// Kubernetes before 1.33 (make test-floor's 1.31): no Service CIDRs to tell
		// coordinator, which ipamd says rather than answer without them.
		refused("no ServiceCIDR API", podArgs("coord", "web"), "serves no networking.k8s.io/v1 ServiceCIDR")
		return
	}
	var services networkingv1.ServiceCIDRList
	if err := env.Client.List(ctx, &services); err != nil {
		t.Fatal(err)
	}
	var serviceCIDRs []string
	for _, s := range services.Items {
		serviceCIDRs = append(serviceCIDRs, s.Spec.CIDRs...)
	}
	if len(serviceCIDRs) == 0 {
		t.Fatal("the API server has no ServiceCIDR: the test needs the default one kube-apiserver creates")
	}

	var got coordinator.Config
	fixtures.Eventually(t, "the configuration of the SpiderCoordinator", func() (bool, string) {
		status, b := askCoordinator(t, socket, podArgs("coord", "web"))
		if status != http.StatusOK {
			return false, fmt.Sprintf("status %d, body %s", status, b)
		}
		got = coordinator.Config{}
		return json.Unmarshal(b, &got) == nil && got.Mode == "underlay", string(b)
	})
	want := coordinator.Config{
		Mode:               "underlay",
		OverlayPodCIDR:     []string{},
		ServiceCIDR:        serviceCIDRs,
		HijackCIDR:         []string{"169.254.0.0/16", "10.96.7.7/32"},
		PolicyRoutes:       []coordinator.Route{{Dst: "192.0.2.0/24", Gw: "10.10.0.1"}},
		PodMACPrefix:       "0a:1b",
		TunePodRoutes:      true, // the CRD's default, as spiderpool's
		PodDefaultRouteNIC: "net1",
		HostRuleTable:      500,
		PodRPFilter:        0,
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("answer\n%s\nwant\n%s", gotJSON, wantJSON)
	}
	// coordinator requires these keys even when empty.
	_, raw := askCoordinator(t, socket, podArgs("coord", "web"))
	for _, key := range []string{`"overlayPodCIDR":[]`, `"serviceCIDR":[`, `"mode":`, `"tunePodRoutes":`} {
		if !bytes.Contains(raw, []byte(key)) {
			t.Errorf("answer %s has no %s", raw, key)
		}
	}

	// A pod that is gone (a DEL after its deletion) is answered without its annotation.
	_, b := askCoordinator(t, socket, podArgs("coord", "gone"))
	var gone coordinator.Config
	if err := json.Unmarshal(b, &gone); err != nil || gone.Mode != "underlay" || gone.PodDefaultRouteNIC != "" {
		t.Errorf("for a pod that is gone: %s", b)
	}

	refused("a pod name that is no Kubernetes name", podArgs("coord", "../../etc"), "podName")
	refused("a namespace that is no Kubernetes name", podArgs("Coord Space", "web"), "podNamespace")
	refused("no pod name", podArgs("coord", ""), "podName: required")
	refused("a body over the bound", []byte(`{"podNamespace":"coord","podName":"`+strings.Repeat("a", 2000)+`"}`), "undecodable")
	refused("a body that is no JSON", []byte(`podName=web`), "undecodable")
	refused("a pod of another node", podArgs("coord", other.Name), "not on node coord-node")
	refused("a default-route-nic that is no interface name", podArgs("coord", bad.Name), "ipam.spidernet.io/default-route-nic", "coord/bad-nic")

	// What spiderpool's schema accepts and nicpool cannot serve is stored, and refused
	// by ipamd naming the field and the fix.
	update := func(mutate func(*v2beta1.CoordinatorSpec)) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(coord), coord); err != nil {
			t.Fatal(err)
		}
		mutate(&coord.Spec)
		if err := env.Client.Update(ctx, coord); err != nil {
			t.Fatal(err)
		}
	}
	update(func(s *v2beta1.CoordinatorSpec) { s.PodCIDRType = ptr("calico") })
	refused("podCIDRType calico", podArgs("coord", "web"), "spidercoordinator default", "spec.podCIDRType", "hijackCIDR")
	update(func(s *v2beta1.CoordinatorSpec) {
		s.PodCIDRType = ptr("none")
		s.PodMACPrefix = ptr("0b:1b")
		s.HijackCIDR = []string{"10.0.0.0/33"}
	})
	refused("a multicast MAC prefix and a CIDR that is none", podArgs("coord", "web"), "spec.podMACPrefix", "spec.hijackCIDR[0]")

	// "disabled", the CRD's word, is "disable" to the plugin.
	update(func(s *v2beta1.CoordinatorSpec) {
		s.PodMACPrefix, s.HijackCIDR, s.Mode = nil, nil, ptr("disabled")
	})
	fixtures.Eventually(t, "mode disabled answered as the plugin's disable", func() (bool, string) {
		_, b := askCoordinator(t, socket, podArgs("coord", "web"))
		var c coordinator.Config
		return json.Unmarshal(b, &c) == nil && c.Mode == "disable", string(b)
	})

	// Of several, the first by name answers, as spiderpool's agent takes the first of
	// its list.
	first := &v2beta1.SpiderCoordinator{ObjectMeta: metav1.ObjectMeta{Name: "a-first"}, Spec: v2beta1.CoordinatorSpec{Mode: ptr("overlay"), PodCIDRType: ptr("none")}}
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), first) })
	fixtures.Eventually(t, "the first SpiderCoordinator by name", func() (bool, string) {
		_, b := askCoordinator(t, socket, podArgs("coord", "web"))
		var c coordinator.Config
		return json.Unmarshal(b, &c) == nil && c.Mode == "overlay", string(b)
	})
}

// servesServiceCIDRs reports whether the API server serves networking.k8s.io/v1
// ServiceCIDRs (Kubernetes 1.33 and later).
func servesServiceCIDRs(t *testing.T) bool {
	t.Helper()
	ok, err := env.Serves(networkingv1.SchemeGroupVersion, "servicecidrs")
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestCoordinatorWithoutItsCRD: with the spiderpool socket set and no SpiderCoordinator
// CRD installed, ipamd still becomes ready (a cache of a kind the API server does not
// serve would never sync), and refuses coordinator's question naming the CRD.
func TestCoordinatorWithoutItsCRD(t *testing.T) {
	ctx := context.Background()
	const name = "spidercoordinators.spiderpool.spidernet.io"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		again := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crd.Spec}
		if err := env.Client.Create(context.Background(), again); err != nil {
			t.Errorf("reinstall %s: %v", name, err)
			return
		}
		fixtures.Eventually(t, "the SpiderCoordinator CRD served again", func() bool {
			return env.Client.List(context.Background(), &v2beta1.SpiderCoordinatorList{}) == nil
		})
	})
	fixtures.Eventually(t, "the API server to stop serving SpiderCoordinators", func() bool {
		served, err := env.Serves(v2beta1.GroupVersion, "spidercoordinators")
		return err == nil && !served
	})

	socket := filepath.Join(t.TempDir(), "spiderpool.sock")
	d, _ := startDaemonWith(t, "coord-nocrd", func(o *daemon.Options) { o.SpiderpoolSocketPath = socket })
	if !d.Ready() {
		t.Fatal("ipamd is not ready without the SpiderCoordinator CRD")
	}
	status, b := askCoordinator(t, socket, podArgs("coord", "web"))
	var msg string
	if status != http.StatusInternalServerError || json.Unmarshal(b, &msg) != nil || !strings.Contains(msg, "its CRD "+name+" is not installed: install nicpool's") {
		t.Errorf("without the CRD: status %d, body %s", status, b)
	}
}
