package annotations

import (
	"testing"
)

// FuzzPodInterfaces: any networks annotation either fails with errors or yields
// eth0 first and unique, valid interface names; it never panics.
func FuzzPodInterfaces(f *testing.F) {
	for _, s := range []string{"", "a,b", "a@foo, b", "ns/a@x", `[{"name":"a","interface":"net9"}]`, `[{"name":"a"}]`, "a@", "x/y/z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, networks string) {
		ifs, errs := PodInterfaces(map[string]string{MultusNetworks: networks}, "ns")
		if len(errs) > 0 {
			if ifs != nil {
				t.Fatalf("errors and a result at once: %v %v", ifs, errs)
			}
			return
		}
		if len(ifs) == 0 || ifs[0].Name != DefaultInterface {
			t.Fatalf("first interface must be eth0: %v", ifs)
		}
		seen := map[string]bool{}
		for i, f := range ifs {
			if err := ValidateInterfaceName(f.Name, Path(MultusNetworks)); err != nil {
				t.Fatalf("invalid name %q accepted: %v", f.Name, err)
			}
			if seen[f.Name] {
				t.Fatalf("duplicate name %q accepted", f.Name)
			}
			seen[f.Name] = true
			if f.Position != i {
				t.Fatalf("position %d at index %d", f.Position, i)
			}
		}
	})
}

// FuzzPoolSelections: a parsed selection resolved against a pod's interfaces names
// every entry with an interface of the pod, once; resolving again changes nothing, and
// the canonical form parses back to itself.
func FuzzPoolSelections(f *testing.F) {
	f.Add(`[{"ipv4":["a"]},{"ipv6":["b"]}]`, "a,b")
	f.Add(`[{"interface":"net1","ipv4":["a"],"cleangateway":true}]`, "x@net1")
	f.Add(`[{"interface":"eth0","ipv4":["p-*"]},{"ipv4":["b"]}]`, "")
	f.Add(`[]`, "a")
	f.Fuzz(func(t *testing.T, value, networks string) {
		sel, errs := ParsePoolSelections(value)
		if len(errs) > 0 {
			return
		}
		ifs, ierrs := PodInterfaces(map[string]string{MultusNetworks: networks}, "ns")
		if len(ierrs) > 0 {
			return
		}
		res, rerrs := Resolve(sel, ifs)
		if len(rerrs) > 0 {
			return
		}
		seen := map[string]bool{}
		for _, s := range res {
			if !hasInterface(ifs, s.Interface) {
				t.Fatalf("resolved to %q, not an interface of the pod %v", s.Interface, ifs)
			}
			if seen[s.Interface] {
				t.Fatalf("interface %q selected twice", s.Interface)
			}
			seen[s.Interface] = true
		}
		canonical := Marshal(res)
		back, errs := ParsePoolSelections(canonical)
		if len(errs) > 0 {
			t.Fatalf("canonical form %s does not parse: %v", canonical, errs)
		}
		again, rerrs := Resolve(back, ifs)
		if len(rerrs) > 0 || Marshal(again) != canonical {
			t.Fatalf("not idempotent: %s → %s (%v)", canonical, Marshal(again), rerrs)
		}
	})
}
