package annotations

import (
	"fmt"
	"strings"
	"testing"
)

// The catalogue of network default pools: a network configuration is a tenant's
// document, held to the bounds of a pod's selection.
func TestValidateNetworkDefaultPools(t *testing.T) {
	many := func(n int, name func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = name(i)
		}
		return out
	}
	const v4, v6 = "ipam.default_ipv4_ippool", "ipam.default_ipv6_ippool"
	tests := []struct {
		name   string
		v4, v6 []string
		want   string // "" for valid
	}{
		{"none", nil, nil, ""},
		{"one of each", []string{"a"}, []string{"b"}, ""},
		{"the bound", many(32, func(i int) string { return fmt.Sprintf("p%d", i) }), many(32, func(i int) string { return fmt.Sprintf("q%d", i) }), ""},
		{"sixteen patterns", many(16, func(i int) string { return fmt.Sprintf("p%d-*", i) }), nil, ""},
		{"one over the bound across families", many(33, func(i int) string { return fmt.Sprintf("p%d", i) }), many(32, func(i int) string { return fmt.Sprintf("q%d", i) }), "at most 64 pools"},
		{"250k wildcards", many(250000, func(int) string { return "*" }), nil, "at most 64 pools"},
		{"seventeen patterns", many(17, func(i int) string { return fmt.Sprintf("p%d-*", i) }), nil, "at most 16 wildcard"},
		{"duplicate", []string{"a", "b", "a"}, nil, v4 + "[2]: Duplicate"},
		{"duplicate pattern", nil, []string{"v6-*", "v6-*"}, v6 + "[1]: Duplicate"},
		{"the same name in both families", []string{"a"}, []string{"a"}, ""},
		{"malformed pattern", []string{"pool-["}, nil, v4 + "[0]"},
		{"not a pool name", nil, []string{"Pool_A"}, v6 + "[0]"},
		{"empty name", []string{""}, nil, v4 + "[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateNetworkDefaultPools(DefaultPools{Key: v4, Names: tt.v4}, DefaultPools{Key: v6, Names: tt.v6})
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs.ToAggregate())
			case tt.want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.want)):
				t.Errorf("errors %v, want one saying %q", errs.ToAggregate(), tt.want)
			case len(errs) > 4:
				t.Errorf("%d errors: a bound must stop the work, not list every entry", len(errs))
			}
		})
	}
}
