package local

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
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

// RecordedAddrs reads a pod's addresses where a user sees them, and returns its
// SpiderEndpoint's per interface (`kubectl get se`) with an error unless they agree:
// the endpoint is the pod's (its UID), and each of ifaces has one IPv4 and one IPv6
// address recorded, the same as the interface has in the pod's network namespace on
// its node. The map is nil when either could not be read.
func (s *Stack) RecordedAddrs(ctx context.Context, pod corev1.Pod, ifaces []string) (map[string][]netip.Addr, error) {
	seen, err := s.PodAddrs(pod.Namespace, pod.Name)
	if err != nil {
		return nil, err
	}
	ep := &v2beta1.SpiderEndpoint{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, ep); err != nil {
		return nil, fmt.Errorf("pod %s: its SpiderEndpoint: %w", pod.Name, err)
	}
	var errs []error
	if ep.Status.Current.UID != string(pod.UID) {
		errs = append(errs, fmt.Errorf("pod %s: SpiderEndpoint of pod UID %s, want %s", pod.Name, ep.Status.Current.UID, pod.UID))
	}
	recorded := map[string][]netip.Addr{}
	for _, d := range ep.Status.Current.IPs {
		for _, cidr := range []*string{d.IPv4, d.IPv6} {
			if cidr == nil {
				continue
			}
			p, err := netip.ParsePrefix(*cidr)
			if err != nil {
				return nil, fmt.Errorf("pod %s: SpiderEndpoint address %q: %w", pod.Name, *cidr, err)
			}
			recorded[d.Interface] = append(recorded[d.Interface], p.Addr())
		}
	}
	for _, iface := range ifaces {
		if !dualStack(recorded[iface]) || !sameAddrs(recorded[iface], seen[iface]) {
			errs = append(errs, fmt.Errorf("pod %s %s: SpiderEndpoint records %v, the interface has %v; want the same IPv4 and IPv6", pod.Name, iface, recorded[iface], seen[iface]))
		}
	}
	return recorded, errors.Join(errs...)
}

// dualStack says whether addrs are one IPv4 and one IPv6 address.
func dualStack(addrs []netip.Addr) bool {
	return len(addrs) == 2 && addrs[0].Is4() != addrs[1].Is4()
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}
