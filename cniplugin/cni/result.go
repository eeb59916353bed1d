package cni

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nicpool/nicpool/ipamd/api"
)

// BuildResult turns ipamd's answer for one interface into a CNI result: its addresses,
// its routes, and a default route through the gateway of each address family unless
// the answer says clean gateway.
func BuildResult(resp *api.AllocateResponse) (*current.Result, error) {
	r := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	gateways := map[int]netip.Addr{} // address bit length → gateway
	for i, ipc := range resp.IPs {
		addr, err := parsePrefix(ipc.Address)
		if err != nil {
			return nil, fmt.Errorf("ips[%d].address from pool %q: %w", i, ipc.Pool, err)
		}
		out := &current.IPConfig{Address: ipNet(addr)}
		if ipc.Gateway != "" && !resp.CleanGateway {
			gw, err := parseAddr(ipc.Gateway)
			if err != nil {
				return nil, fmt.Errorf("ips[%d].gateway from pool %q: %w", i, ipc.Pool, err)
			}
			if gw.Is4() != addr.Addr().Is4() {
				return nil, fmt.Errorf("ips[%d]: gateway %s of pool %q is not in the address family of %s", i, gw, ipc.Pool, addr)
			}
			out.Gateway = gw.AsSlice()
			if _, seen := gateways[gw.BitLen()]; !seen {
				gateways[gw.BitLen()] = gw
			}
		}
		r.IPs = append(r.IPs, out)
	}
	hasDefault := map[int]bool{}
	for i, rt := range resp.Routes {
		dst, err := parsePrefix(rt.Dst)
		if err != nil {
			return nil, fmt.Errorf("routes[%d].dst: %w", i, err)
		}
		dst = dst.Masked()
		out := &types.Route{Dst: ipNet(dst)}
		if rt.Gw != "" {
			gw, err := parseAddr(rt.Gw)
			if err != nil {
				return nil, fmt.Errorf("routes[%d].gw: %w", i, err)
			}
			if gw.Is4() != dst.Addr().Is4() {
				return nil, fmt.Errorf("routes[%d]: gateway %s is not in the address family of %s", i, gw, dst)
			}
			out.GW = gw.AsSlice()
		}
		if dst.Bits() == 0 {
			hasDefault[dst.Addr().BitLen()] = true
		}
		r.Routes = append(r.Routes, out)
	}
	if !resp.CleanGateway {
		// A default route already in ipamd's routes wins; adding ours too would make
		// the main plugin fail with "file exists" when it installs them.
		for _, bits := range []int{32, 128} {
			gw, ok := gateways[bits]
			if !ok || hasDefault[bits] {
				continue
			}
			r.Routes = append(r.Routes, &types.Route{Dst: ipNet(netip.PrefixFrom(gw, 0).Masked()), GW: gw.AsSlice()})
		}
	}
	return r, nil
}

// parsePrefix and parseAddr refuse IPv4-mapped IPv6 and zoned addresses: a kernel
// configures them as IPv4 (or not at all), so they could never match what the pod has.
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	if p.Addr().Is4In6() {
		return p, fmt.Errorf("%q is an IPv4-mapped IPv6 address: write IPv4 addresses in dotted form", s)
	}
	return p, nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, err
	}
	if a.Is4In6() || a.Zone() != "" {
		return a, fmt.Errorf("%q is an IPv4-mapped or zoned IPv6 address: write a plain IPv4 or IPv6 address", s)
	}
	return a, nil
}

// ipNet converts a prefix to the net.IPNet the CNI types use, keeping the host bits:
// "10.6.0.7/16" stays 10.6.0.7 with a /16 mask.
func ipNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Reservation is a set of interface addresses in CIDR form, sorted, for comparison.
type Reservation []netip.Prefix

func (r Reservation) String() string {
	if len(r) == 0 {
		return "none"
	}
	s := make([]string, len(r))
	for i, p := range r {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// Equal reports whether both hold the same addresses with the same prefix lengths.
func (r Reservation) Equal(o Reservation) bool { return slices.Equal(r, o) }

// ReservationFromIPAMD is the reservation ipamd reports.
func ReservationFromIPAMD(ips []api.IPConfig) (Reservation, error) {
	out := make(Reservation, 0, len(ips))
	for i, ipc := range ips {
		p, err := parsePrefix(ipc.Address)
		if err != nil {
			return nil, fmt.Errorf("ips[%d].address from pool %q: %w", i, ipc.Pool, err)
		}
		out = append(out, p)
	}
	return sortReservation(out), nil
}

// ReservationFromResult is the reservation a previous result recorded for ifName: the
// addresses bound to that interface, or bound to no interface (as an IPAM plugin's own
// result has them).
func ReservationFromResult(prev types.Result, ifName string) (Reservation, error) {
	r, err := current.NewResultFromResult(prev)
	if err != nil {
		return nil, fmt.Errorf("convert prevResult: %w", err)
	}
	out := Reservation{}
	for _, ipc := range r.IPs {
		if ipc == nil {
			continue
		}
		if ipc.Interface != nil {
			idx := *ipc.Interface
			if idx < 0 || idx >= len(r.Interfaces) || r.Interfaces[idx] == nil {
				return nil, fmt.Errorf("prevResult address %s names interface index %d, which the result does not list", ipc.Address.String(), idx)
			}
			if r.Interfaces[idx].Name != ifName {
				continue
			}
		}
		addr, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			return nil, fmt.Errorf("prevResult address %q is not an IP address", ipc.Address.String())
		}
		ones, bits := ipc.Address.Mask.Size()
		addr = addr.Unmap()
		if bits != addr.BitLen() {
			return nil, fmt.Errorf("prevResult address %s has a mask of the wrong family", ipc.Address.String())
		}
		out = append(out, netip.PrefixFrom(addr, ones))
	}
	return sortReservation(out), nil
}

func sortReservation(r Reservation) Reservation {
	slices.SortFunc(r, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(r)
}
