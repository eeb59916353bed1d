package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// podInterface is the interface every test pod gets from the macvlan network, as
// Multus names a pod's first secondary interface.
const podInterface = "net1"

// node is the stand-in for a Kubernetes node's network: a namespace of its own holding
// the macvlan parent (one end of a veth pair), so that the tests touch nothing of the
// host's network. Runtimes exec CNI plugins in the node's namespace; so do the tests.
type node struct {
	netns  ns.NetNS
	parent string
}

func newNode() (*node, error) {
	n, err := testutils.NewNS()
	if err != nil {
		return nil, fmt.Errorf("create node netns: %w", err)
	}
	nd := &node{netns: n, parent: "np-parent"}
	err = n.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: nd.parent}, PeerName: "np-peer"}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", nd.parent, err)
		}
		for _, name := range []string{"lo", nd.parent, "np-peer"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return fmt.Errorf("set %s up: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		nd.close()
		return nil, err
	}
	return nd, nil
}

// close removes the node's namespace, and with it the veth pair and every macvlan
// left on it.
func (n *node) close() {
	_ = n.netns.Close()
	_ = testutils.UnmountNS(n.netns)
}

// do runs fn in the node's namespace, as a runtime runs CNI plugins: processes exec'd
// by fn start there.
func (n *node) do(fn func() error) error {
	return n.netns.Do(func(ns.NetNS) error { return fn() })
}

// pod is a Pod object in the API server and its sandbox: a fresh network namespace.
type pod struct {
	obj         *corev1.Pod
	netns       ns.NetNS
	containerID string
}

// newPod creates a pod bound to the test node, and its namespace; both go away when the
// test ends.
func newPod(t *testing.T, name string, annotations map[string]string) *pod {
	t.Helper()
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if err := suite.env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() { _ = suite.env.Client.Delete(context.Background(), obj) })
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create netns of pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		_ = testutils.UnmountNS(n)
	})
	return &pod{obj: obj, netns: n, containerID: fmt.Sprintf("%s-%d", name, time.Now().UnixNano())}
}

// runtimeConf is what a runtime passes for the pod's secondary interface.
func (p *pod) runtimeConf() *libcni.RuntimeConf {
	return p.runtimeConfFor(podInterface)
}

// runtimeConfFor is what a runtime passes for the pod's interface ifName.
func (p *pod) runtimeConfFor(ifName string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.containerID,
		NetNS:       p.netns.Path(),
		IfName:      ifName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", p.obj.Namespace},
			{"K8S_POD_NAME", p.obj.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.containerID},
			{"K8S_POD_UID", string(p.obj.UID)},
		},
	}
}

// network is one CNI network configuration list: macvlan on the node's parent with
// nicpool as IPAM.
type network struct {
	list *libcni.NetworkConfigList
	ipam map[string]any
}

func newNetwork(t *testing.T, name, cniVersion string, ipam map[string]any) *network {
	t.Helper()
	full := map[string]any{
		"type":                  "nicpool",
		"ipam_unix_socket_path": api.DefaultSocketPath,
		"log_level":             "debug",
	}
	for k, v := range ipam {
		full[k] = v
	}
	conf := map[string]any{
		"cniVersion": cniVersion,
		"name":       name,
		"plugins": []any{map[string]any{
			"type":   "macvlan",
			"master": suite.node.parent,
			"mode":   "bridge",
			"ipam":   full,
		}},
	}
	data, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		t.Fatalf("network %s: %v", name, err)
	}
	return &network{list: list, ipam: full}
}

// ipamOnly is the same network with nicpool as its only plugin, as a main plugin that
// forwards GC to its IPAM plugin would run it (macvlan v1.10.0 does not forward GC).
func (n *network) ipamOnly(t *testing.T) *libcni.NetworkConfigList {
	t.Helper()
	conf := map[string]any{
		"cniVersion": n.list.CNIVersion,
		"name":       n.list.Name,
		"plugins":    []any{map[string]any{"type": "nicpool", "ipam": n.ipam}},
	}
	data, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// The CNI verbs, run in the node's namespace through libcni.

func (n *network) add(p *pod) (types.Result, error) {
	var res types.Result
	err := suite.node.do(func() (err error) {
		res, err = suite.cni.AddNetworkList(context.Background(), n.list, p.runtimeConf())
		return err
	})
	return res, err
}

func (n *network) mustAdd(t *testing.T, p *pod) *current.Result {
	t.Helper()
	res, err := n.add(p)
	if err != nil {
		t.Fatalf("ADD %s: %v", p.obj.Name, err)
	}
	t.Cleanup(func() { _ = n.del(p) })
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatalf("ADD %s: result: %v", p.obj.Name, err)
	}
	return r
}

func (n *network) check(p *pod) error {
	return suite.node.do(func() error {
		return suite.cni.CheckNetworkList(context.Background(), n.list, p.runtimeConf())
	})
}

func (n *network) del(p *pod) error {
	return suite.node.do(func() error {
		return suite.cni.DelNetworkList(context.Background(), n.list, p.runtimeConf())
	})
}

func (n *network) status() error {
	return suite.node.do(func() error {
		return suite.cni.GetStatusNetworkList(context.Background(), n.list)
	})
}

// observed is what a user sees inside the pod: the interface's addresses and the
// routes that leave through it.
type observed struct {
	addresses     []netip.Prefix
	defaultRoute  netip.Addr // gateway of the IPv4 default route; invalid when none
	defaultRoute6 netip.Addr // gateway of the IPv6 default route; invalid when none
	// routes are the other routes with a gateway, as "dst via gw".
	routes []string
}

func (p *pod) observe(t *testing.T) observed {
	t.Helper()
	var o observed
	err := p.netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(podInterface)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			ip, _ := netip.AddrFromSlice(a.IP)
			if ip.Unmap().IsLinkLocalUnicast() {
				continue
			}
			ones, _ := a.Mask.Size()
			o.addresses = append(o.addresses, netip.PrefixFrom(ip.Unmap(), ones))
		}
		routes, err := netlink.RouteList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, r := range routes {
			gw, _ := netip.AddrFromSlice(r.Gw)
			gw = gw.Unmap()
			if !gw.IsValid() {
				continue
			}
			switch {
			case r.Dst == nil && gw.Is4(), r.Dst != nil && r.Dst.String() == "0.0.0.0/0":
				o.defaultRoute = gw
			case r.Dst == nil, r.Dst.String() == "::/0":
				o.defaultRoute6 = gw
			default:
				o.routes = append(o.routes, r.Dst.String()+" via "+gw.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("observe pod %s: %v", p.obj.Name, err)
	}
	return o
}

// hasInterface reports whether the pod's namespace still holds the macvlan interface.
func (p *pod) hasInterface(t *testing.T) bool {
	t.Helper()
	var found bool
	err := p.netns.Do(func(ns.NetNS) error {
		_, err := netlink.LinkByName(podInterface)
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		t.Fatalf("look for %s in pod %s: %v", podInterface, p.obj.Name, err)
	}
	return found
}

// allocations is what the pool's addresses are allocated to, as the API server has it
// (the pool's IPBlocks, read through the ledger's listing).
func allocations(t *testing.T, pool string) v2beta1.PoolIPAllocations {
	t.Helper()
	recs, err := ledger.PoolRecords(context.Background(), suite.env.Client, pool)
	if err != nil {
		t.Fatalf("read the records of pool %s: %v", pool, err)
	}
	return recs
}

// cniCode is the CNI error code in err, 0 when err carries none.
func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// addressOf is the pod's IPv4 address in the result.
func addressOf(t *testing.T, r *current.Result) netip.Prefix {
	t.Helper()
	for _, ip := range r.IPs {
		a, _ := netip.AddrFromSlice(ip.Address.IP)
		if a.Unmap().Is4() {
			ones, _ := ip.Address.Mask.Size()
			return netip.PrefixFrom(a.Unmap(), ones)
		}
	}
	t.Fatalf("result has no IPv4 address: %v", r)
	return netip.Prefix{}
}

// pluginLog is the plugin's log so far.
func pluginLog(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(suite.logFile)
	if err != nil {
		t.Fatalf("plugin log: %v", err)
	}
	return string(data)
}

// dumpLog shows the end of the plugin's and ipamd's logs when a test failed.
func dumpLog(t *testing.T) {
	if !t.Failed() {
		return
	}
	for what, file := range map[string]string{"plugin": suite.logFile, "ipamd": suite.ipamd.logFile} {
		if data, err := os.ReadFile(file); err == nil {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 20 {
				lines = lines[len(lines)-20:]
			}
			t.Logf("%s log (last lines):\n%s", what, strings.Join(lines, "\n"))
		}
	}
}
