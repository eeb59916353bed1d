package pod_test

import (
	"context"
	"testing"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// The three spiderpool bugs start with an ippools entry whose interface is unknown.
// Through the real API server, every entry comes back named, for both Multus forms,
// explicit names, positional naming after an explicit name, and the single-NIC
// annotation.
func TestEntriesComeBackNamed(t *testing.T) {
	createNamespace(t, "naming", nil)
	createPools(t,
		fixtures.Pool("n-eth0-v4", "10.61.0.0/24", []string{"10.61.0.10-10.61.0.20"}),
		fixtures.Pool("n-eth0-v6", "fd00:61::/64", []string{"fd00:61::10-fd00:61::20"}),
		fixtures.Pool("n-a-v4", "10.62.0.0/24", []string{"10.62.0.10-10.62.0.20"}),
		fixtures.Pool("n-b-v4", "10.63.0.0/24", []string{"10.63.0.10-10.63.0.20"}),
	)
	three := `[{"ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"]},{"ipv4":["n-a-v4"]},{"ipv4":["n-b-v4"],"cleangateway":true}]`
	cases := []struct {
		name     string
		networks string
		pools    string
		single   string
		want     string
		// keep: ippool stays beside the ippools it became, as the marker that
		// the pod chose eth0's pools only (its other interfaces take defaults).
		keep bool
	}{
		{
			name:     "short form, positional",
			networks: "macvlan-a, macvlan-b",
			pools:    three,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"]},{"interface":"net1","ipv4":["n-a-v4"]},{"interface":"net2","ipv4":["n-b-v4"],"cleangateway":true}]`,
		},
		{
			name:     "JSON form, positional",
			networks: `[{"name":"macvlan-a"},{"name":"macvlan-b","namespace":"naming"}]`,
			pools:    three,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"]},{"interface":"net1","ipv4":["n-a-v4"]},{"interface":"net2","ipv4":["n-b-v4"],"cleangateway":true}]`,
		},
		{
			name:     "short form, explicit @ifname",
			networks: "macvlan-a@data0, macvlan-b@data1",
			pools:    three,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"]},{"interface":"data0","ipv4":["n-a-v4"]},{"interface":"data1","ipv4":["n-b-v4"],"cleangateway":true}]`,
		},
		{
			name:     "JSON form, explicit interface",
			networks: `[{"name":"macvlan-a","interface":"data0"},{"name":"macvlan-b"}]`,
			pools:    three,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"]},{"interface":"data0","ipv4":["n-a-v4"]},{"interface":"net2","ipv4":["n-b-v4"],"cleangateway":true}]`,
		},
		{
			name:     "positional after an explicit name does not renumber",
			networks: "macvlan-a@foo, macvlan-b",
			pools:    three,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"]},{"interface":"foo","ipv4":["n-a-v4"]},{"interface":"net2","ipv4":["n-b-v4"],"cleangateway":true}]`,
		},
		{
			name:     "named entries in any order stay as written",
			networks: "macvlan-a, macvlan-b",
			pools:    `[{"interface":"net2","ipv4":["n-b-v4"]},{"interface":"eth0","ipv4":["n-eth0-v4"]}]`,
			want:     `[{"interface":"net2","ipv4":["n-b-v4"]},{"interface":"eth0","ipv4":["n-eth0-v4"]}]`,
		},
		{
			name:     "fewer entries than interfaces",
			networks: "macvlan-a, macvlan-b",
			pools:    `[{"ipv4":["n-eth0-v4"]}]`,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"]}]`,
		},
		{
			name:     "single-NIC annotation becomes ippools for eth0 and stays as its marker",
			networks: "macvlan-a",
			single:   `{"ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"],"cleangateway":true}`,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"],"ipv6":["n-eth0-v6"],"cleangateway":true}]`,
			keep:     true,
		},
		{
			// spiderpool ignores "interface" in the single form; its e2e suite writes it.
			name:     "single-NIC annotation with an interface key, which is ignored",
			networks: "macvlan-a",
			single:   `{"interface":"eth0","ipv4":["n-eth0-v4"]}`,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"]}]`,
			keep:     true,
		},
		{
			name:     "beside an ippools of several entries, the single-NIC annotation is removed",
			networks: "macvlan-a",
			pools:    `[{"ipv4":["n-eth0-v4"]},{"ipv4":["n-a-v4"]}]`,
			single:   `{"ipv4":["n-b-v4"]}`,
			want:     `[{"interface":"eth0","ipv4":["n-eth0-v4"]},{"interface":"net1","ipv4":["n-a-v4"]}]`,
		},
		{
			name:  "wildcards expand to the pools of the family, in name order",
			pools: `[{"ipv4":["n-*-v4"],"ipv6":["n-eth0-v?"]}]`,
			want:  `[{"interface":"eth0","ipv4":["n-a-v4","n-b-v4","n-eth0-v4"],"ipv6":["n-eth0-v6"]}]`,
		},
	}
	ctx := context.Background()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ann := selectionAnnotations(tc.networks, tc.pools, tc.single)
			got, err := createPod(ctx, newPod("naming", podName("named", i), ann))
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if v := got.Annotations[annotations.IPPools]; v != tc.want {
				t.Errorf("%s\n got %s\nwant %s", annotations.IPPools, v, tc.want)
			}
			if _, still := got.Annotations[annotations.IPPool]; still != tc.keep {
				t.Errorf("%s kept after admission: %v; want %v", annotations.IPPool, still, tc.keep)
			}
			if _, stamped := got.Annotations[annotations.EndpointUID]; stamped {
				t.Errorf("a pod without a StatefulSet owner was stamped with %s", annotations.EndpointUID)
			}

			// Idempotent: a pod created with the resolved annotations comes back as
			// it went in.
			again, err := createPod(ctx, newPod("naming", podName("again", i), got.Annotations))
			if err != nil {
				t.Fatalf("create with resolved annotations: %v", err)
			}
			if again.Annotations[annotations.IPPools] != tc.want {
				t.Errorf("second admission changed %s to %s", annotations.IPPools, again.Annotations[annotations.IPPools])
			}
			if again.Annotations[annotations.IPPool] != got.Annotations[annotations.IPPool] {
				t.Errorf("second admission changed %s to %q", annotations.IPPool, again.Annotations[annotations.IPPool])
			}
		})
	}
}

func podName(prefix string, i int) string {
	return prefix + "-" + string(rune('a'+i))
}

// selectionAnnotations are a pod's Multus networks and pool selections, the ones that
// are set.
func selectionAnnotations(networks, pools, single string) map[string]string {
	ann := map[string]string{}
	if networks != "" {
		ann[annotations.MultusNetworks] = networks
	}
	if pools != "" {
		ann[annotations.IPPools] = pools
	}
	if single != "" {
		ann[annotations.IPPool] = single
	}
	return ann
}
