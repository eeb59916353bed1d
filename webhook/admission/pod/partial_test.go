package pod_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/admission/pod"
)

// A pod whose ippools leave out an interface nicpool will be asked to serve is
// admitted with a warning naming the interface: ipamd refuses that interface's ADD,
// as spiderpool does. Admission tells from the interface's network (its
// NetworkAttachmentDefinition's IPAM) and, for eth0, from being told that nicpool
// serves the cluster network.
func TestPartialSelectionWarns(t *testing.T) {
	ctx := context.Background()
	v := offlineViews()
	v.Networks.Set(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "macvlan-a"},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"macvlan","ipam":{"type":"nicpool"}}`}})
	v.Networks.Set(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "macvlan-b"},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","plugins":[{"type":"macvlan","ipam":{"type":"spiderpool"}},{"type":"tuning"}]}`}})
	v.Networks.Set(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"macvlan","ipam":{"type":"host-local"}}`}})
	for _, tc := range []struct {
		name        string
		clusterNet  bool
		networks    string
		ann         map[string]string
		wantWarning []string // interfaces named by a warning
	}{
		{"every interface covered", true, "macvlan-a", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["eth0-v4"]},{"interface":"net1","ipv4":["net1-v4"]}]`}, nil},
		{"unnamed entries cover by position", true, "macvlan-a", map[string]string{annotations.IPPools: `[{"ipv4":["eth0-v4"]},{"ipv4":["net1-v4"]}]`}, nil},
		{"nicpool network left out", false, "macvlan-a, macvlan-b", map[string]string{annotations.IPPools: `[{"interface":"net1","ipv4":["net1-v4"]}]`}, []string{"net2"}},
		{"spiderpool-typed network in a list left out", false, "macvlan-b", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["eth0-v4"]}]`}, []string{"net1"}},
		{"eth0 left out, nicpool serves the cluster network", true, "macvlan-a", map[string]string{annotations.IPPools: `[{"interface":"net1","ipv4":["net1-v4"]}]`}, []string{"eth0"}},
		{"eth0 left out, cluster network not nicpool's", false, "macvlan-a", map[string]string{annotations.IPPools: `[{"interface":"net1","ipv4":["net1-v4"]}]`}, nil},
		{"network of another IPAM left out", false, "other", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["eth0-v4"]}]`}, nil},
		{"unknown network left out", false, "absent", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["eth0-v4"]}]`}, nil},
		{"ippool chooses eth0's pools only, the rest take defaults", false, "macvlan-a", map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`}, nil},
		{"ippool as the marker beside its eth0 entry", true, "macvlan-a", map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`, annotations.IPPools: `[{"interface":"eth0","ipv4":["eth0-v4"]}]`}, nil},
		{"ippool beside a partial ippools of several entries is dropped", false, "macvlan-a, macvlan-b", map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`, annotations.IPPools: `[{"interface":"eth0","ipv4":["eth0-v4"]},{"interface":"net1","ipv4":["net1-v4"]}]`}, []string{"net2"}},
	} {
		adm := pod.New(v)
		adm.ClusterNetworkNicpool = tc.clusterNet
		tc.ann[annotations.MultusNetworks] = tc.networks
		d := adm.Decide(ctx, &pod.Pod{Namespace: "default", Name: "p", Annotations: tc.ann})
		if d.Denied() {
			t.Errorf("%s: denied: %v", tc.name, d.Errs)
			continue
		}
		var uncovered []string
		for _, w := range d.Warnings {
			if strings.Contains(w, "names no pools for interface") {
				uncovered = append(uncovered, w)
			}
		}
		if len(uncovered) != len(tc.wantWarning) {
			t.Errorf("%s: warnings %q; want one for each of %v", tc.name, d.Warnings, tc.wantWarning)
			continue
		}
		for i, iface := range tc.wantWarning {
			for _, w := range []string{annotations.IPPools + " names no pools for interface " + iface, "its CNI ADD will fail", `{"interface":"` + iface + `"`} {
				if !strings.Contains(uncovered[i], w) {
					t.Errorf("%s: warning %q lacks %q", tc.name, uncovered[i], w)
				}
			}
		}
	}
}

// warnings collects the API server's warnings to a client.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	w.seen = append(w.seen, text)
	w.mu.Unlock()
}

// Through the API server: the webhook reads NetworkAttachmentDefinitions from its
// cache, and the warning reaches the pod's creator (kubectl prints it).
func TestPartialSelectionWarningReachesTheCreator(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "partial", nil)
	createPools(t, fixtures.Pool("pa-v4", "10.94.0.0/24", []string{"10.94.0.10-10.94.0.20"}))
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "partial", Name: "vlan-a"},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"macvlan","master":"eth0","ipam":{"type":"nicpool"}}`}}
	if err := env.Client.Create(ctx, nad); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "the network in the webhook's view", func() bool { return env.Views.Networks.UsesNicpool("partial/vlan-a") })
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	p := newPod("partial", "p", map[string]string{annotations.MultusNetworks: "vlan-a", annotations.IPPools: `[{"interface":"eth0","ipv4":["pa-v4"]}]`})
	if err := c.Create(ctx, p, dryRun); err != nil {
		t.Fatal(err)
	}
	if len(w.seen) != 1 || !strings.Contains(w.seen[0], "names no pools for interface net1, whose IPAM (network partial/vlan-a) is nicpool") {
		t.Errorf("warnings %q; want one about net1", w.seen)
	}
}
