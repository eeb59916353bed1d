package cni

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nicpool/nicpool/ipamd/api"
)

// resultJSON is the shape a runtime reads, in the spec's words.
type resultJSON struct {
	CNIVersion string `json:"cniVersion"`
	IPs        []struct {
		Version   string `json:"version"`
		Address   string `json:"address"`
		Gateway   string `json:"gateway"`
		Interface *int   `json:"interface"`
	} `json:"ips"`
	Routes []struct {
		Dst string `json:"dst"`
		GW  string `json:"gw"`
	} `json:"routes"`
}

func (r resultJSON) addresses() string {
	var s []string
	for _, ip := range r.IPs {
		s = append(s, ip.Address+" gw "+ip.Gateway)
	}
	return strings.Join(s, "; ")
}

func (r resultJSON) routes() string {
	var s []string
	for _, rt := range r.Routes {
		s = append(s, rt.Dst+" via "+rt.GW)
	}
	return strings.Join(s, "; ")
}

func TestBuildResult(t *testing.T) {
	tests := []struct {
		name          string
		resp          api.AllocateResponse
		wantAddresses string
		wantRoutes    string
	}{{
		name:          "IPv4 with gateway gets a default route",
		resp:          api.AllocateResponse{Interface: "net1", IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1", Pool: "v4"}}},
		wantAddresses: "10.6.0.7/16 gw 10.6.0.1",
		wantRoutes:    "0.0.0.0/0 via 10.6.0.1",
	}, {
		name:          "clean gateway: no gateway, no default route",
		resp:          api.AllocateResponse{IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}}, CleanGateway: true},
		wantAddresses: "10.6.0.7/16 gw ",
	}, {
		name:          "pool without gateway",
		resp:          api.AllocateResponse{IPs: []api.IPConfig{{Address: "192.168.1.9/24"}}},
		wantAddresses: "192.168.1.9/24 gw ",
	}, {
		name: "dual stack with pool routes",
		resp: api.AllocateResponse{
			IPs:    []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}, {Address: "fd00::7/64", Gateway: "fd00::1"}},
			Routes: []api.Route{{Dst: "172.16.0.0/12", Gw: "10.6.0.254"}, {Dst: "fd01::/64"}},
		},
		wantAddresses: "10.6.0.7/16 gw 10.6.0.1; fd00::7/64 gw fd00::1",
		wantRoutes:    "172.16.0.0/12 via 10.6.0.254; fd01::/64 via ; 0.0.0.0/0 via 10.6.0.1; ::/0 via fd00::1",
	}, {
		name: "default route from ipamd is not duplicated",
		resp: api.AllocateResponse{
			IPs:    []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}},
			Routes: []api.Route{{Dst: "0.0.0.0/0", Gw: "10.6.0.2"}},
		},
		wantAddresses: "10.6.0.7/16 gw 10.6.0.1",
		wantRoutes:    "0.0.0.0/0 via 10.6.0.2",
	}, {
		name: "route destinations are masked",
		resp: api.AllocateResponse{
			IPs:          []api.IPConfig{{Address: "10.6.0.7/16"}},
			Routes:       []api.Route{{Dst: "172.16.3.4/12", Gw: "10.6.0.254"}},
			CleanGateway: true,
		},
		wantAddresses: "10.6.0.7/16 gw ",
		wantRoutes:    "172.16.0.0/12 via 10.6.0.254",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := BuildResult(&tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			got := printed(t, r, "1.1.0")
			if got.addresses() != tt.wantAddresses {
				t.Errorf("addresses %q, want %q", got.addresses(), tt.wantAddresses)
			}
			if got.routes() != tt.wantRoutes {
				t.Errorf("routes %q, want %q", got.routes(), tt.wantRoutes)
			}
		})
	}
}

func TestBuildResultRejectsBadAnswers(t *testing.T) {
	for name, resp := range map[string]api.AllocateResponse{
		"address without prefix":     {IPs: []api.IPConfig{{Address: "10.6.0.7"}}},
		"gateway not an address":     {IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "gw"}}},
		"gateway of other family":    {IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "fd00::1"}}},
		"route dst not a prefix":     {IPs: []api.IPConfig{{Address: "10.6.0.7/16"}}, Routes: []api.Route{{Dst: "10.0.0.0"}}},
		"route gw not an address":    {IPs: []api.IPConfig{{Address: "10.6.0.7/16"}}, Routes: []api.Route{{Dst: "10.0.0.0/8", Gw: "x"}}},
		"route gw of other family":   {IPs: []api.IPConfig{{Address: "10.6.0.7/16"}}, Routes: []api.Route{{Dst: "10.0.0.0/8", Gw: "fd00::1"}}},
		"address of impossible bits": {IPs: []api.IPConfig{{Address: "10.6.0.7/33"}}},
		"IPv4-mapped address":        {IPs: []api.IPConfig{{Address: "::ffff:10.6.0.7/112"}}},
		"zoned gateway":              {IPs: []api.IPConfig{{Address: "fd00::7/64", Gateway: "fd00::1%eth0"}}},
		"IPv4-mapped route gateway":  {IPs: []api.IPConfig{{Address: "fd00::7/64"}}, Routes: []api.Route{{Dst: "fd01::/64", Gw: "::ffff:1.2.3.4"}}},
	} {
		if _, err := BuildResult(&resp); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestPrintEachVersion: the result reaches the runtime in the version it asked for,
// with the fields that version has (0.3.x/0.4.0 carry an IP "version").
func TestPrintEachVersion(t *testing.T) {
	r, err := BuildResult(&api.AllocateResponse{IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1"}, {Address: "fd00::7/64", Gateway: "fd00::1"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range SupportedVersions.SupportedVersions() {
		t.Run(v, func(t *testing.T) {
			got := printed(t, r, v)
			if got.CNIVersion != v {
				t.Errorf("cniVersion %q, want %q", got.CNIVersion, v)
			}
			wantIPVersion := map[string][2]string{"0.3.0": {"4", "6"}, "0.3.1": {"4", "6"}, "0.4.0": {"4", "6"}, "1.0.0": {"", ""}, "1.1.0": {"", ""}}[v]
			if len(got.IPs) != 2 || got.IPs[0].Version != wantIPVersion[0] || got.IPs[1].Version != wantIPVersion[1] {
				t.Errorf("ips %+v: want versions %q", got.IPs, wantIPVersion)
			}
			if got.addresses() != "10.6.0.7/16 gw 10.6.0.1; fd00::7/64 gw fd00::1" || got.routes() != "0.0.0.0/0 via 10.6.0.1; ::/0 via fd00::1" {
				t.Errorf("got %s / %s", got.addresses(), got.routes())
			}
		})
	}
	var buf bytes.Buffer
	if err := Print(&buf, r, "9.9.9"); cniCode(err) != types.ErrIncompatibleCNIVersion {
		t.Errorf("an unknown version must be a CNI error: got %v", err)
	}
}

func TestReservationFromResult(t *testing.T) {
	prev := &current.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*current.Interface{{Name: "net1", Sandbox: "/run/netns/p"}, {Name: "eth0", Sandbox: "/run/netns/p"}},
	}
	for _, a := range []struct {
		cidr string
		idx  *int
	}{{"10.6.0.7/16", current.Int(0)}, {"fd00::7/64", current.Int(0)}, {"10.9.0.3/24", current.Int(1)}, {"10.6.0.7/16", nil}} {
		ipn, err := types.ParseCIDR(a.cidr)
		if err != nil {
			t.Fatal(err)
		}
		prev.IPs = append(prev.IPs, &current.IPConfig{Address: *ipn, Interface: a.idx})
	}
	r, err := ReservationFromResult(prev, "net1")
	if err != nil {
		t.Fatal(err)
	}
	if r.String() != "10.6.0.7/16, fd00::7/64" {
		t.Errorf("reservation of net1: %s", r)
	}
	have, err := ReservationFromIPAMD([]api.IPConfig{{Address: "fd00::7/64"}, {Address: "10.6.0.7/16"}})
	if err != nil || !have.Equal(r) {
		t.Errorf("ipamd's reservation %s (%v) should equal %s", have, err, r)
	}
	other, _ := ReservationFromIPAMD([]api.IPConfig{{Address: "10.6.0.7/24"}, {Address: "fd00::7/64"}})
	if other.Equal(r) {
		t.Errorf("a different prefix length must not compare equal")
	}

	prev.IPs = append(prev.IPs, &current.IPConfig{Address: prev.IPs[0].Address, Interface: current.Int(7)})
	if _, err := ReservationFromResult(prev, "net1"); err == nil {
		t.Errorf("an interface index out of range must be an error")
	}
}

func printed(t *testing.T, r types.Result, version string) resultJSON {
	t.Helper()
	var buf bytes.Buffer
	if err := Print(&buf, r, version); err != nil {
		t.Fatalf("Print %s: %v", version, err)
	}
	var got resultJSON
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, buf.String())
	}
	return got
}
