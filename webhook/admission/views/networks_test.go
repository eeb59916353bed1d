package views

import (
	"slices"
	"testing"

	"github.com/nicpool/nicpool/cniplugin"
)

// The IPAM types admission treats as nicpool are the names the plugin is installed
// under.
func TestIPAMTypesAreThePluginNames(t *testing.T) {
	if want := []string{cniplugin.Name, cniplugin.NameSpiderpool}; !slices.Equal(IPAMTypes, want) {
		t.Errorf("IPAMTypes %v; want the plugin's names %v", IPAMTypes, want)
	}
	for _, tc := range []struct {
		config string
		want   bool
	}{
		{`{"type":"macvlan","ipam":{"type":"nicpool"}}`, true},
		{`{"plugins":[{"type":"macvlan","ipam":{"type":"spiderpool"}},{"type":"tuning"}]}`, true},
		{`{"type":"macvlan","ipam":{"type":"host-local"}}`, false},
		{`not json`, false},
	} {
		if got := UsesNicpool(tc.config); got != tc.want {
			t.Errorf("UsesNicpool(%s) = %v; want %v", tc.config, got, tc.want)
		}
	}
}
