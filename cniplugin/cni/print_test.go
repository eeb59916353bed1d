package cni

import (
	"bytes"
	"net"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nicpool/nicpool/ipamd/api"
)

// libraryPrint is how the CNI library prints result in version.
func libraryPrint(t *testing.T, result types.Result, version string) string {
	t.Helper()
	out, err := result.GetAsVersion(version)
	if err != nil {
		t.Fatalf("library: %v", err)
	}
	var buf bytes.Buffer
	if err := out.PrintTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestPrintMatchesTheCNILibrary: what ADD prints is, byte for byte, what the CNI
// library prints for the same result in every version the plugin speaks: for every
// shape of ipamd answer (IPv4, IPv6, dual stack, gateways or none, ipamd's routes,
// clean gateway, no address), and for results the plugin's own printer does not
// handle (left to the library).
func TestPrintMatchesTheCNILibrary(t *testing.T) {
	answers := map[string]*api.AllocateResponse{
		"ipv4 with gateway":    {IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}}},
		"ipv6 with gateway":    {IPs: []api.IPConfig{{Address: "fd00:0:0:1:0:0:0:7/64", Gateway: "fd00:0:0:1::1"}}},
		"dual stack":           {IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}, {Address: "1:0:0:2:0:0:0:3/64", Gateway: "1::2:0:0:0:1"}}},
		"no gateway":           {IPs: []api.IPConfig{{Address: "192.168.1.200/24"}}},
		"clean gateway":        {IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}}, CleanGateway: true},
		"ipamd routes":         {IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}}, Routes: []api.Route{{Dst: "10.96.0.0/12", Gw: "10.6.0.254"}, {Dst: "172.16.0.0/16"}, {Dst: "fd00:abcd::/32", Gw: "fd00::1"}}},
		"ipamd default route":  {IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}}, Routes: []api.Route{{Dst: "0.0.0.0/0", Gw: "10.6.0.9"}}},
		"no address no routes": {},
	}
	for name, answer := range answers {
		r, err := BuildResult(answer)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range SupportedVersions.SupportedVersions() {
			if _, ok := appendResult(nil, r, v); !ok {
				t.Errorf("%s in %s: the plugin's printer must handle every result BuildResult makes", name, v)
			}
			var buf bytes.Buffer
			if err := Print(&buf, r, v); err != nil {
				t.Fatalf("%s in %s: %v", name, v, err)
			}
			if want := libraryPrint(t, r, v); buf.String() != want {
				t.Errorf("%s in %s:\n got %s\nwant %s", name, v, buf.String(), want)
			}
		}
	}

	_, dst, _ := net.ParseCIDR("10.0.0.0/8")
	mtu := &current.Result{CNIVersion: "1.1.0", Routes: []*types.Route{{Dst: *dst, MTU: 1400}}}
	withInterface := &current.Result{CNIVersion: "1.1.0", Interfaces: []*current.Interface{{Name: "net1"}}, IPs: []*current.IPConfig{{Address: *dst, Interface: current.Int(0)}}}
	withDNS := &current.Result{CNIVersion: "1.1.0", DNS: types.DNS{Nameservers: []string{"10.0.0.10"}}}
	for name, r := range map[string]*current.Result{"route mtu": mtu, "interface index": withInterface, "dns": withDNS} {
		for _, v := range SupportedVersions.SupportedVersions() {
			var buf bytes.Buffer
			if err := Print(&buf, r, v); err != nil {
				t.Fatalf("%s in %s: %v", name, v, err)
			}
			if want := libraryPrint(t, r, v); buf.String() != want {
				t.Errorf("%s in %s:\n got %s\nwant %s", name, v, buf.String(), want)
			}
		}
	}
}
