package annotations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPodInterfaces(t *testing.T) {
	cases := []struct {
		name      string
		networks  string
		want      []string // interface names, in order
		networks2 []string // "namespace/name" of each secondary interface
		wantErr   string   // substring of the error; "" means success
	}{
		{name: "no annotation", networks: "", want: []string{"eth0"}},
		{name: "blank", networks: "  ", want: []string{"eth0"}},
		{name: "empty JSON list", networks: "[]", want: []string{"eth0"}},
		{name: "short form positional", networks: "a,b", want: []string{"eth0", "net1", "net2"}, networks2: []string{"pod-ns/a", "pod-ns/b"}},
		{name: "short form spaces", networks: " a , b ", want: []string{"eth0", "net1", "net2"}},
		{name: "explicit name does not renumber the rest", networks: "a@foo, b", want: []string{"eth0", "foo", "net2"}},
		{name: "explicit name later", networks: "a, b@data0, c", want: []string{"eth0", "net1", "data0", "net3"}},
		{name: "namespace in short form", networks: "team-a/macvlan@net5, b", want: []string{"eth0", "net5", "net2"}, networks2: []string{"team-a/macvlan", "pod-ns/b"}},
		{name: "JSON form positional", networks: `[{"name":"a"},{"name":"b","namespace":"other"}]`, want: []string{"eth0", "net1", "net2"}, networks2: []string{"pod-ns/a", "other/b"}},
		{name: "JSON form explicit", networks: `[{"name":"a","interface":"foo"},{"name":"b"}]`, want: []string{"eth0", "foo", "net2"}},
		{name: "JSON form other fields accepted", networks: `[{"name":"a","ips":["10.0.0.1/24"],"mac":"c2:b0:57:49:47:f1","default-route":["10.0.0.1"]}]`, want: []string{"eth0", "net1"}},
		{name: "malformed JSON", networks: `[{"name":"a"`, wantErr: "must be a JSON list of network selection elements"},
		{name: "JSON not a list of objects", networks: `["a"]`, wantErr: "must be a JSON list"},
		{name: "duplicate explicit names", networks: "a@x, b@x", wantErr: `interface "x" of network pod-ns/b is already used by network pod-ns/a`},
		{name: "explicit name collides with positional", networks: "a@net2, b", wantErr: `interface "net2"`},
		{name: "explicit eth0 collides with cluster network", networks: "a@eth0", wantErr: "already used by the cluster network"},
		{name: "interface name longer than 15", networks: "a@abcdefghijklmnop", wantErr: "may not be more than 15"},
		{name: "JSON interface longer than 15", networks: `[{"name":"a","interface":"abcdefghijklmnop"}]`, wantErr: "[0].interface"},
		{name: "interface with slash", networks: `[{"name":"a","interface":"a/b"}]`, wantErr: "must not contain"},
		{name: "interface with space", networks: `[{"name":"a","interface":"a b"}]`, wantErr: "printable ASCII"},
		{name: "interface not ASCII", networks: "a@n\u00e9t", wantErr: "printable ASCII"},
		{name: "empty item", networks: "a,,b", wantErr: "empty network name"},
		{name: "empty ifname", networks: "a@", wantErr: "[namespace/]name[@interface]"},
		{name: "empty namespace", networks: "/a", wantErr: "[namespace/]name[@interface]"},
		{name: "two slashes", networks: "x/y/z", wantErr: "[namespace/]name[@interface]"},
		{name: "two at signs", networks: "a@b@c", wantErr: "[namespace/]name[@interface]"},
		{name: "upper case network name", networks: "Macvlan", wantErr: "network name"},
		{name: "JSON missing name", networks: `[{"interface":"net1"}]`, wantErr: "[0].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ifs, errs := PodInterfaces(map[string]string{MultusNetworks: tc.networks}, "pod-ns")
			if tc.wantErr != "" {
				if len(errs) == 0 {
					t.Fatalf("want error containing %q, got interfaces %v", tc.wantErr, ifs)
				}
				if !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
					t.Fatalf("error %q does not contain %q", errs.ToAggregate(), tc.wantErr)
				}
				if !strings.Contains(errs.ToAggregate().Error(), "metadata.annotations[k8s.v1.cni.cncf.io/networks]") {
					t.Errorf("error %q does not name the annotation", errs.ToAggregate())
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("unexpected error: %v", errs.ToAggregate())
			}
			var got, nets []string
			for i, f := range ifs {
				got = append(got, f.Name)
				if f.Position != i {
					t.Errorf("interface %s has position %d, want %d", f.Name, f.Position, i)
				}
				if i > 0 {
					nets = append(nets, f.Network)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("names (-want +got):\n%s", d)
			}
			if tc.networks2 != nil {
				if d := cmp.Diff(tc.networks2, nets); d != "" {
					t.Errorf("networks (-want +got):\n%s", d)
				}
			}
		})
	}
}
