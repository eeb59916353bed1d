package annotations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePoolSelections(t *testing.T) {
	cases := []struct {
		name    string
		value   string
		want    []PoolSelection
		wantErr string
	}{
		{name: "unnamed", value: `[{"ipv4":["a"]},{"ipv4":["b"],"ipv6":["b6"]}]`, want: []PoolSelection{{IPv4: []string{"a"}}, {IPv4: []string{"b"}, IPv6: []string{"b6"}}}},
		{name: "named", value: `[{"interface":"eth0","ipv4":["a"]},{"interface":"net1","ipv6":["b6"],"cleangateway":true}]`, want: []PoolSelection{{Interface: "eth0", IPv4: []string{"a"}}, {Interface: "net1", IPv6: []string{"b6"}, CleanGateway: true}}},
		{name: "wildcards", value: `[{"ipv4":["pool-*","p?ol","[ab]-v4"]}]`, want: []PoolSelection{{IPv4: []string{"pool-*", "p?ol", "[ab]-v4"}}}},
		{name: "malformed JSON", value: `[{"ipv4":["a"]`, wantErr: "must be a JSON list"},
		{name: "object instead of list", value: `{"ipv4":["a"]}`, wantErr: "must be a JSON list"},
		{name: "unknown field", value: `[{"ipv4pools":["a"]}]`, wantErr: `unknown field "ipv4pools"`},
		{name: "trailing data", value: `[{"ipv4":["a"]}] x`, wantErr: "unexpected data"},
		{name: "empty list", value: `[]`, wantErr: "at least one entry"},
		{name: "entry without pools", value: `[{"interface":"eth0"}]`, wantErr: `[0]: Required value: at least one pool in "ipv4" or "ipv6"`},
		{name: "entry with empty lists", value: `[{"ipv4":[],"ipv6":[]}]`, wantErr: "at least one pool"},
		{name: "mixed named and unnamed", value: `[{"interface":"eth0","ipv4":["a"]},{"ipv4":["b"]}]`, wantErr: "do not mix"},
		{name: "duplicate interface", value: `[{"interface":"net1","ipv4":["a"]},{"interface":"net1","ipv4":["b"]}]`, wantErr: `[1].interface: Invalid value: "net1": duplicate: entry 0 already selects this interface`},
		{name: "interface too long", value: `[{"interface":"abcdefghijklmnop","ipv4":["a"]}]`, wantErr: "[0].interface: Too long"},
		{name: "empty pool name", value: `[{"ipv4":[""]}]`, wantErr: "[0].ipv4[0]: Required value"},
		{name: "invalid pool name", value: `[{"ipv4":["Pool_A"]}]`, wantErr: "[0].ipv4[0]: Invalid value: \"Pool_A\": must be a SpiderIPPool name"},
		{name: "malformed wildcard", value: `[{"ipv4":["pool-["]}]`, wantErr: "malformed wildcard"},
		{name: "duplicate pool", value: `[{"ipv6":["a","a"]}]`, wantErr: "[0].ipv6[1]: Duplicate value"},
		{name: "null", value: `null`, wantErr: "at least one entry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParsePoolSelections(tc.value)
			checkResult(t, tc.wantErr, errs.ToAggregate(), IPPools)
			if tc.wantErr == "" {
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
			}
		})
	}
}

func checkResult(t *testing.T, wantErr string, err error, key string) {
	t.Helper()
	if wantErr == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want error containing %q, got none", wantErr)
	}
	if !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("error %q does not contain %q", err, wantErr)
	}
	if !strings.Contains(err.Error(), "metadata.annotations["+key+"]") {
		t.Errorf("error %q does not name the annotation %s", err, key)
	}
}

func TestResolve(t *testing.T) {
	ifs, errs := PodInterfaces(map[string]string{MultusNetworks: "a, b@data, c"}, "ns")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	cases := []struct {
		name    string
		value   string
		want    []string
		wantErr string
	}{
		{name: "unnamed map by position", value: `[{"ipv4":["p0"]},{"ipv4":["p1"]},{"ipv4":["p2"]}]`, want: []string{"eth0", "net1", "data"}},
		{name: "fewer entries than interfaces", value: `[{"ipv4":["p0"]}]`, want: []string{"eth0"}},
		{name: "all four", value: `[{"ipv4":["p0"]},{"ipv4":["p1"]},{"ipv4":["p2"]},{"ipv6":["p3"]}]`, want: []string{"eth0", "net1", "data", "net3"}},
		{name: "named out of order", value: `[{"interface":"net3","ipv4":["p"]},{"interface":"eth0","ipv4":["q"]}]`, want: []string{"net3", "eth0"}},
		{name: "more entries than interfaces", value: `[{"ipv4":["p"]},{"ipv4":["p"]},{"ipv4":["p"]},{"ipv4":["p"]},{"ipv4":["p"]}]`, wantErr: "has more entries than the pod has interfaces (eth0, net1, data, net3"},
		{name: "interface the pod does not have", value: `[{"interface":"net2","ipv4":["p"]}]`, wantErr: "[0].interface: Not found: \"net2: the pod's interfaces are eth0, net1, data, net3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel, errs := ParsePoolSelections(tc.value)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			before := Marshal(sel)
			got, rerrs := Resolve(sel, ifs)
			checkResult(t, tc.wantErr, rerrs.ToAggregate(), IPPools)
			if Marshal(sel) != before {
				t.Errorf("Resolve modified its input")
			}
			if tc.wantErr != "" {
				return
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Interface)
			}
			if d := cmp.Diff(tc.want, names); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			// Resolving the resolved form changes nothing: the webhook is idempotent.
			again, errs := Resolve(got, ifs)
			if len(errs) > 0 || Marshal(again) != Marshal(got) {
				t.Errorf("second Resolve changed the result: %s → %s (%v)", Marshal(got), Marshal(again), errs)
			}
		})
	}
}

func TestParseSinglePoolSelection(t *testing.T) {
	cases := []struct {
		name, value, wantErr string
		want                 SinglePoolSelection
	}{
		{name: "v4", value: `{"ipv4":["a"]}`, want: SinglePoolSelection{IPv4: []string{"a"}}},
		{name: "dual with cleangateway", value: `{"ipv4":["a"],"ipv6":["b"],"cleangateway":true}`, want: SinglePoolSelection{IPv4: []string{"a"}, IPv6: []string{"b"}, CleanGateway: true}},
		{name: "empty object", value: `{}`, wantErr: "at least one pool"},
		{name: "list instead of object", value: `[{"ipv4":["a"]}]`, wantErr: "must be a JSON object"},
		// spiderpool ignores "interface" in the single form, and its e2e suite writes it.
		{name: "interface is accepted and ignored", value: `{"interface":"eth0","ipv4":["a"]}`, want: SinglePoolSelection{Interface: "eth0", IPv4: []string{"a"}}},
		{name: "interface of another name is ignored too", value: `{"interface":"net1","ipv4":["a"]}`, want: SinglePoolSelection{Interface: "net1", IPv4: []string{"a"}}},
		{name: "interface must be a string", value: `{"interface":1,"ipv4":["a"]}`, wantErr: "must be a JSON object such as"},
		{name: "every other unknown field is refused", value: `{"interface":"eth0","ipv4":["a"],"ipv4pools":["b"]}`, wantErr: `unknown field "ipv4pools"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseSinglePoolSelection(tc.value)
			checkResult(t, tc.wantErr, errs.ToAggregate(), IPPool)
			if tc.wantErr == "" {
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
			}
		})
	}
}

func TestParseRoutesAndDefaults(t *testing.T) {
	routes, errs := ParseRoutes(`[{"dst":"10.7.0.0/16","gw":"10.6.0.1"},{"dst":"fd00:7::/64","gw":"fd00:6::1"}]`)
	if len(errs) > 0 || len(routes) != 2 {
		t.Fatalf("valid routes: %v %v", routes, errs)
	}
	for _, tc := range []struct{ value, wantErr string }{
		{`[{"dst":"10.7.0.1/16","gw":"10.6.0.1"}]`, "[0].dst: Invalid value: \"10.7.0.1/16\": must be in canonical form with no host bits set: use 10.7.0.0/16"},
		{`[{"dst":"10.7.0.0/16","gw":"fd00::1"}]`, "[0].gw: Invalid value: \"fd00::1\": must be of the same IP family as dst"},
		{`[{"dst":"nope","gw":"10.6.0.1"}]`, "[0].dst"},
		{`[{"dst":"10.7.0.0/16","gw":"10.6.0"}]`, "[0].gw"},
		{`[{"dst":"10.7.0.0/16"}]`, "[0].gw"},
		{`{"dst":"10.7.0.0/16"}`, "must be a JSON list"},
	} {
		_, errs := ParseRoutes(tc.value)
		checkResult(t, tc.wantErr, errs.ToAggregate(), Routes)
	}
	names, errs := ParseNamespaceDefaultPools(NamespaceDefaultIPv4Pool, `["a","b-*"]`)
	if len(errs) > 0 || !cmp.Equal(names, []string{"a", "b-*"}) {
		t.Errorf("namespace defaults: %v %v", names, errs)
	}
	_, errs = ParseNamespaceDefaultPools(NamespaceDefaultIPv6Pool, `"a"`)
	checkResult(t, "must be a JSON list of pool names", errs.ToAggregate(), NamespaceDefaultIPv6Pool)
	_, errs = ParseNamespaceDefaultPools(NamespaceDefaultIPv6Pool, `["A"]`)
	checkResult(t, "[0]: Invalid value", errs.ToAggregate(), NamespaceDefaultIPv6Pool)
}
