package local

import (
	"fmt"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// PodAddrs is what a pod's processes see of their addresses: the global unicast
// addresses of each interface in the pod's network namespace, on whichever node
// runs it, by interface name.
func (s *Stack) PodAddrs(namespace, name string) (map[string][]netip.Addr, error) {
	path, ok := s.Sandbox(namespace, name)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s has no sandbox on its node", namespace, name)
	}
	out := map[string][]netip.Addr{}
	err := ns.WithNetNSPath(path, func(ns.NetNS) error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				return err
			}
			for _, a := range addrs {
				ip, _ := netip.AddrFromSlice(a.IP)
				if ip = ip.Unmap(); ip.IsGlobalUnicast() {
					out[l.Attrs().Name] = append(out[l.Attrs().Name], ip)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: read its interfaces: %w", namespace, name, err)
	}
	return out, nil
}
