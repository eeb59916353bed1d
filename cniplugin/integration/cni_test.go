package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

func TestAddPutsTheAddressOnTheInterfaceWithADefaultRoute(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("gw-pool", "10.77.1.0/24", []string{"10.77.1.10-10.77.1.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.1.1")))
	nw := newNetwork(t, "gw-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"gw-pool"}})
	p := newPod(t, "gw-a", nil)

	r := nw.mustAdd(t, p)
	addr := addressOf(t, r)
	seen := p.observe(t)
	if !slices.Contains(seen.addresses, addr) {
		t.Errorf("the result says %s but %s in the pod holds %v", addr, podInterface, seen.addresses)
	}
	if !netip.MustParsePrefix("10.77.1.0/24").Contains(addr.Addr()) || addr.Bits() != 24 {
		t.Errorf("address %s is not from gw-pool's subnet 10.77.1.0/24", addr)
	}
	if seen.defaultRoute != netip.MustParseAddr("10.77.1.1") {
		t.Errorf("default route via %v, want via the pool's gateway 10.77.1.1", seen.defaultRoute)
	}
	got := allocations(t, "gw-pool")[addr.Addr().String()]
	if got.Pod != testNamespace+"/gw-a" || got.PodUID != string(p.obj.UID) || got.Interface != podInterface {
		t.Errorf("gw-pool records %s as %+v, want the pod %s/gw-a, its UID and %s", addr.Addr(), got, testNamespace, podInterface)
	}
}

func TestCleanGatewayLeavesNoDefaultRoute(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("clean-pool", "10.77.2.0/24", []string{"10.77.2.10-10.77.2.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.2.1")))
	nw := newNetwork(t, "clean-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"clean-pool"}, "clean_gateway": true})
	p := newPod(t, "clean-a", nil)

	r := nw.mustAdd(t, p)
	addr := addressOf(t, r)
	seen := p.observe(t)
	if !slices.Contains(seen.addresses, addr) {
		t.Errorf("the result says %s but %s in the pod holds %v", addr, podInterface, seen.addresses)
	}
	if seen.defaultRoute.IsValid() {
		t.Errorf("clean_gateway is set but the pod has a default route via %s", seen.defaultRoute)
	}
	for _, ip := range r.IPs {
		if ip.Gateway != nil {
			t.Errorf("clean_gateway is set but the result carries gateway %s", ip.Gateway)
		}
	}
}

func TestCheckFailsOnceTheReservationChangesOrIsGone(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("check-pool", "10.77.3.0/24", []string{"10.77.3.10-10.77.3.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.3.1")))
	nw := newNetwork(t, "check-net", "1.0.0", map[string]any{"default_ipv4_ippool": []string{"check-pool"}})
	p := newPod(t, "check-a", nil)
	addr := addressOf(t, nw.mustAdd(t, p)).Addr()

	if err := nw.check(p); err != nil {
		t.Fatalf("CHECK right after ADD: %v", err)
	}

	// Someone moves the pod's record to another address of the pool.
	other := addr.Next()
	editPool(t, "check-pool", func(a v2beta1.PoolIPAllocations) {
		a[other.String()] = a[addr.String()]
		delete(a, addr.String())
	})
	var err error
	fixtures.Eventually(t, "CHECK fails once the pool records another address", func() (bool, string) {
		err = nw.check(p)
		return err != nil, "CHECK still passes"
	})
	if cniCode(err) != 111 {
		t.Errorf("CHECK: %v (code %d), want nicpool's reservation differs (111)", err, cniCode(err))
	}

	// Then the record is gone altogether.
	editPool(t, "check-pool", func(a v2beta1.PoolIPAllocations) { delete(a, other.String()) })
	removeFromEndpoint(t, p)
	fixtures.Eventually(t, "CHECK reports the reservation missing once the pool records none", func() (bool, string) {
		err = nw.check(p)
		return cniCode(err) == 110, fmt.Sprintf("CHECK answers %v", err)
	})
}

func TestDelReleasesAndIsIdempotent(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("del-pool", "10.77.4.0/24", []string{"10.77.4.10-10.77.4.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.4.1")))
	nw := newNetwork(t, "del-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"del-pool"}})
	p := newPod(t, "del-a", nil)
	addr := addressOf(t, nw.mustAdd(t, p)).Addr().String()
	if _, ok := allocations(t, "del-pool")[addr]; !ok {
		t.Fatalf("del-pool does not record %s after ADD", addr)
	}

	if err := nw.del(p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if p.hasInterface(t) {
		t.Errorf("%s is still in the pod after DEL", podInterface)
	}
	if a, ok := allocations(t, "del-pool")[addr]; ok {
		t.Errorf("del-pool still records %s for %+v after DEL", addr, a)
	}
	if err := nw.del(p); err != nil {
		t.Errorf("second DEL: %v", err)
	}

	unknown := newPod(t, "del-never-added", nil)
	rt := unknown.runtimeConf()
	rt.NetNS = "" // as runtimes call DEL once the sandbox is gone
	err := suite.node.do(func() error { return suite.cni.DelNetworkList(context.Background(), nw.list, rt) })
	if err != nil {
		t.Errorf("DEL of a container nicpool never saw: %v", err)
	}
}

func TestGCReleasesExactlyTheAttachmentsThatAreNotValid(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("gc-pool", "10.77.5.0/24", []string{"10.77.5.10-10.77.5.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.5.1")))
	nw := newNetwork(t, "gc-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"gc-pool"}})
	pods := map[string]*pod{}
	addrs := map[string]string{}
	for _, name := range []string{"gc-a", "gc-b", "gc-c"} {
		pods[name] = newPod(t, name, nil)
		addrs[name] = addressOf(t, nw.mustAdd(t, pods[name])).Addr().String()
	}
	attachment := func(name string) types.GCAttachment {
		return types.GCAttachment{ContainerID: pods[name].containerID, IfName: podInterface}
	}
	held := func(names ...string) func() (bool, string) {
		return func() (bool, string) {
			a := allocations(t, "gc-pool")
			for _, name := range []string{"gc-a", "gc-b", "gc-c"} {
				_, has := a[addrs[name]]
				if has != slices.Contains(names, name) {
					return false, fmt.Sprintf("gc-pool holds %v", a)
				}
			}
			return true, ""
		}
	}

	// nicpool's own GC verb, as a main plugin that forwards GC runs it. A runtime
	// with no cached attachments leaves the decision entirely to the plugin, which
	// releases an attachment that is not valid once its own pod is gone.
	if err := suite.env.Client.Delete(context.Background(), pods["gc-b"].obj, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	fresh := libcni.NewCNIConfigWithCacheDir([]string{suite.binDir}, filepath.Join(suite.work, "gc-empty-cache"), nil)
	err := suite.node.do(func() error {
		return fresh.GCNetworkList(context.Background(), nw.ipamOnly(t), &libcni.GCArgs{ValidAttachments: []types.GCAttachment{attachment("gc-a"), attachment("gc-c")}})
	})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	fixtures.Eventually(t, "GC released gc-b only", held("gc-a", "gc-c"))
	if err := nw.check(pods["gc-a"]); err != nil {
		t.Errorf("CHECK of the valid gc-a after GC: %v", err)
	}

	// GC as a runtime issues it on the macvlan network: libcni deletes the cached
	// attachments that are not valid, through macvlan and nicpool's DEL.
	err = suite.node.do(func() error {
		return suite.cni.GCNetworkList(context.Background(), nw.list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{attachment("gc-a")}})
	})
	if err != nil {
		t.Fatalf("GC through the runtime's cache: %v", err)
	}
	fixtures.Eventually(t, "GC released everything but gc-a", held("gc-a"))
	if pods["gc-c"].hasInterface(t) || !pods["gc-a"].hasInterface(t) {
		t.Errorf("after GC gc-c must have lost %s and gc-a kept it", podInterface)
	}
}

func TestStatusFailsWhenThePoolIsExhausted(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("tiny-pool", "10.77.6.0/24", []string{"10.77.6.10-10.77.6.11"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.6.1")))
	nw := newNetwork(t, "tiny-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"tiny-pool"}})
	fixtures.Eventually(t, "STATUS passes while tiny-pool has free addresses", func() (bool, string) {
		err := nw.status()
		return err == nil, fmt.Sprint(err)
	})
	a, b := newPod(t, "tiny-a", nil), newPod(t, "tiny-b", nil)
	nw.mustAdd(t, a)
	nw.mustAdd(t, b)

	var err error
	fixtures.Eventually(t, "STATUS fails once tiny-pool is full", func() (bool, string) {
		err = nw.status()
		return err != nil, "STATUS still passes"
	})
	if cniCode(err) != types.ErrPluginNotAvailable {
		t.Errorf("STATUS of an exhausted network: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
	c := newPod(t, "tiny-c", nil)
	if _, err := nw.add(c); cniCode(err) != api.CodePoolExhausted {
		t.Errorf("ADD into a full pool: %v, want code %d", err, api.CodePoolExhausted)
	}
	if len(allocations(t, "tiny-pool")) != 2 {
		t.Errorf("a failed ADD changed tiny-pool: %v", allocations(t, "tiny-pool"))
	}
	// Runtimes follow a failed ADD with DEL. macvlan v1.10.0 leaves its link behind
	// when IPAM fails (its cleanup checks a shadowed error), so this DEL is what
	// cleans the pod up; nicpool must let it succeed.
	if err := nw.del(c); err != nil {
		t.Errorf("DEL after the failed ADD: %v", err)
	}
	if c.hasInterface(t) {
		t.Errorf("%s is still in the pod after ADD failed and DEL ran", podInterface)
	}

	if err := nw.del(a); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	fixtures.Eventually(t, "STATUS passes again once an address is free", func() (bool, string) {
		err := nw.status()
		return err == nil, fmt.Sprint(err)
	})
}

func TestWhileIPAMDIsDown(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("down-pool", "10.77.7.0/24", []string{"10.77.7.10-10.77.7.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.7.1")))
	// The log file makes nicpool-cni serve every call of this network (see
	// TestFrontHandsOff), so the test can read what the plugin logged.
	nw := newNetwork(t, "down-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"down-pool"}, "log_file_path": cniplugin.LogDir + "/" + logName})
	p := newPod(t, "down-a", nil)
	addr := addressOf(t, nw.mustAdd(t, p)).Addr().String()

	suite.ipamd.stop()
	restarted := false
	defer func() {
		if !restarted {
			if err := suite.ipamd.start(); err != nil {
				t.Errorf("restart ipamd: %v", err)
			}
		}
	}()

	if err := nw.status(); cniCode(err) != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with ipamd down: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
	q := newPod(t, "down-b", nil)
	if _, err := nw.add(q); cniCode(err) != types.ErrTryAgainLater {
		t.Errorf("ADD with ipamd down: %v, want code %d (try again later)", err, types.ErrTryAgainLater)
	}
	// A pod deleted while its node's ipamd is down (a rollout, an uninstall) must not
	// hang in Terminating: DEL gives up on ipamd after a short wait and succeeds,
	// leaving the address recorded for the garbage collector to release.
	if err := nw.del(p); err != nil {
		t.Errorf("DEL with ipamd down: %v, want success", err)
	}
	if p.hasInterface(t) {
		t.Errorf("%s is still in the pod after DEL", podInterface)
	}
	if a, ok := allocations(t, "down-pool")[addr]; !ok || a.PodUID != string(p.obj.UID) {
		t.Errorf("down-pool records %s as %+v, want it kept for pod %s until the garbage collector releases it", addr, a, p.obj.Name)
	}
	if !strings.Contains(pluginLog(t), "the garbage collector releases the addresses once the pod is deleted") {
		t.Errorf("the plugin's log does not say that the release is left to the garbage collector")
	}

	restarted = true
	if err := suite.ipamd.start(); err != nil {
		t.Fatalf("restart ipamd: %v", err)
	}
	// A DEL repeated once ipamd is back releases at once.
	if err := nw.del(p); err != nil {
		t.Errorf("DEL with ipamd back: %v", err)
	}
	if a, ok := allocations(t, "down-pool")[addr]; ok {
		t.Errorf("down-pool still records %s for %+v after DEL", addr, a)
	}
}

func TestWhileIPAMDIsStarting(t *testing.T) {
	defer dumpLog(t)
	socket, stop := startUnsynced(t)
	defer stop()
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("start-pool", "10.77.12.0/24", []string{"10.77.12.10-10.77.12.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.12.1")))
	nw := newNetwork(t, "start-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"start-pool"}, "ipam_unix_socket_path": socket})
	p := newPod(t, "start-a", nil)

	_, err := nw.add(p)
	if cniCode(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), "try again later") {
		t.Errorf("ADD while ipamd is starting: %v, want code %d saying to try again later", err, types.ErrTryAgainLater)
	}
	if strings.Contains(err.Error(), "not answering") {
		t.Errorf("ADD while ipamd is starting: %v: ipamd answers, the error must be its own", err)
	}
	if err := nw.del(p); cniCode(err) != types.ErrTryAgainLater {
		t.Errorf("DEL while ipamd is starting: %v, want the retryable code %d", err, types.ErrTryAgainLater)
	}
	if err := nw.status(); cniCode(err) != types.ErrPluginNotAvailable {
		t.Errorf("STATUS while ipamd is starting: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
}

func TestEachCNIVersion(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("ver-pool", "10.77.8.0/24", []string{"10.77.8.10-10.77.8.30"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.8.1")))
	for i, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			nw := newNetwork(t, fmt.Sprintf("ver-net-%d", i), v, map[string]any{"default_ipv4_ippool": []string{"ver-pool"}})
			p := newPod(t, fmt.Sprintf("ver-%d", i), nil)
			res, err := nw.add(p)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if res.Version() != v {
				t.Errorf("result version %s, want %s", res.Version(), v)
			}
			r, err := current.NewResultFromResult(res)
			if err != nil {
				t.Fatal(err)
			}
			addr := addressOf(t, r)
			if seen := p.observe(t); !slices.Contains(seen.addresses, addr) || seen.defaultRoute != netip.MustParseAddr("10.77.8.1") {
				t.Errorf("pod sees %+v, want %s and a default route via 10.77.8.1", seen, addr)
			}
			if v != "0.3.1" { // CHECK exists from 0.4.0 on
				if err := nw.check(p); err != nil {
					t.Errorf("CHECK: %v", err)
				}
			}
			if err := nw.status(); err != nil { // a no-op before 1.1.0
				t.Errorf("STATUS: %v", err)
			}
			if err := nw.del(p); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if _, ok := allocations(t, "ver-pool")[addr.Addr().String()]; ok {
				t.Errorf("ver-pool still records %s after DEL", addr.Addr())
			}
			if err := nw.del(p); err != nil {
				t.Errorf("second DEL: %v", err)
			}
		})
	}
}

func TestTwoPodsOnOneParentTalkTCP(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("tcp-pool", "10.77.9.0/24", []string{"10.77.9.10-10.77.9.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.9.1")))
	nw := newNetwork(t, "tcp-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"tcp-pool"}})
	server, clientPod := newPod(t, "tcp-server", nil), newPod(t, "tcp-client", nil)
	serverAddr := addressOf(t, nw.mustAdd(t, server)).Addr()
	nw.mustAdd(t, clientPod)

	var ln net.Listener
	err := server.netns.Do(func(ns.NetNS) (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(serverAddr, 0).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen in tcp-server on %s: %v", serverAddr, err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = c.Write([]byte("echo " + line))
	}()

	var reply string
	err = clientPod.netns.Do(func(ns.NetNS) error {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return err
		}
		reply, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	if err != nil {
		t.Fatalf("tcp-client → %s: %v", ln.Addr(), err)
	}
	if reply != "echo hello\n" {
		t.Errorf("tcp-server answered %q", reply)
	}
}

// editPool changes the pool's allocations behind ipamd's back, as an operator editing
// the pool's blocks (or a buggy controller) would.
func editPool(t *testing.T, pool string, edit func(v2beta1.PoolIPAllocations)) {
	t.Helper()
	ctx := context.Background()
	c := suite.env.Client
	before := allocations(t, pool)
	after := v2beta1.PoolIPAllocations{}
	for a, rec := range before {
		after[a] = rec
	}
	edit(after)
	l := ledger.New(ledger.Options{Cache: c, Client: c, Fresh: c, Log: logr.Discard()})
	var gone []ledger.Record
	for a, rec := range before {
		if after[a] != rec {
			gone = append(gone, ledger.Record{Pool: pool, Addr: netip.MustParseAddr(a), Holder: rec})
		}
	}
	if _, err := l.ReleaseRecords(ctx, gone); err != nil {
		t.Fatalf("edit pool %s: %v", pool, err)
	}
	var p v2beta1.SpiderIPPool
	if err := c.Get(ctx, client.ObjectKey{Name: pool}, &p); err != nil {
		t.Fatal(err)
	}
	if err := l.Import(ctx, &p, after); err != nil {
		t.Fatalf("edit pool %s: %v", pool, err)
	}
}

// removeFromEndpoint drops the test interface from the pod's SpiderEndpoint.
func removeFromEndpoint(t *testing.T, p *pod) {
	t.Helper()
	ctx := context.Background()
	c := suite.env.Client
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ep v2beta1.SpiderEndpoint
		if err := c.Get(ctx, client.ObjectKeyFromObject(p.obj), &ep); err != nil {
			return err
		}
		ep.Status.Current.IPs = slices.DeleteFunc(ep.Status.Current.IPs, func(d v2beta1.IPAllocationDetail) bool { return d.Interface == podInterface })
		return c.Update(ctx, &ep)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("remove %s from the SpiderEndpoint of %s: %v", podInterface, p.obj.Name, err)
	}
}

func TestAddInstallsPoolAndPodRoutesOfThisInterface(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("route-pool", "10.77.10.0/24", []string{"10.77.10.10-10.77.10.20"},
		fixtures.VersionOfSubnet, fixtures.Gateway("10.77.10.1"), func(p *v2beta1.SpiderIPPool) {
			p.Spec.Routes = []v2beta1.Route{{Dst: "172.30.0.0/16", Gw: "10.77.10.254"}}
		}))
	nw := newNetwork(t, "route-net", "1.0.0", map[string]any{"default_ipv4_ippool": []string{"route-pool"}})
	// The second route's gateway is in no subnet of net1: it belongs to another
	// interface of the pod and must not appear on this one.
	p := newPod(t, "route-a", map[string]string{
		annotations.Routes: `[{"dst":"172.31.0.0/16","gw":"10.77.10.253"},{"dst":"172.29.0.0/16","gw":"10.99.0.1"}]`,
	})
	nw.mustAdd(t, p)

	seen := p.observe(t)
	slices.Sort(seen.routes)
	want := []string{"172.30.0.0/16 via 10.77.10.254", "172.31.0.0/16 via 10.77.10.253"}
	if !slices.Equal(seen.routes, want) {
		t.Errorf("routes through %s: %v, want %v", podInterface, seen.routes, want)
	}
	if seen.defaultRoute != netip.MustParseAddr("10.77.10.1") {
		t.Errorf("default route via %v, want via 10.77.10.1", seen.defaultRoute)
	}
}

func TestDualStack(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("ds-v4", "10.77.11.0/24", []string{"10.77.11.10-10.77.11.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.11.1")))
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("ds-v6", "fd77:11::/64", []string{"fd77:11::10-fd77:11::20"}, fixtures.VersionOfSubnet, fixtures.Gateway("fd77:11::1")))
	nw := newNetwork(t, "ds-net", "1.1.0", map[string]any{"default_ipv4_ippool": "ds-v4", "default_ipv6_ippool": []string{"ds-v6"}})
	p := newPod(t, "ds-a", nil)
	r := nw.mustAdd(t, p)
	if len(r.IPs) != 2 {
		t.Fatalf("result has %d addresses, want one IPv4 and one IPv6: %v", len(r.IPs), r)
	}
	seen := p.observe(t)
	for _, ip := range r.IPs {
		a, _ := netip.AddrFromSlice(ip.Address.IP)
		ones, _ := ip.Address.Mask.Size()
		if pfx := netip.PrefixFrom(a.Unmap(), ones); !slices.Contains(seen.addresses, pfx) {
			t.Errorf("the result says %s but the pod holds %v", pfx, seen.addresses)
		}
	}
	if seen.defaultRoute != netip.MustParseAddr("10.77.11.1") || seen.defaultRoute6 != netip.MustParseAddr("fd77:11::1") {
		t.Errorf("default routes via %v and %v, want via 10.77.11.1 and fd77:11::1", seen.defaultRoute, seen.defaultRoute6)
	}
	if err := nw.check(p); err != nil {
		t.Errorf("CHECK of a dual-stack interface: %v", err)
	}
}

// TestTwoInterfacesOfOnePod is the multi-NIC case nicpool exists for: one pod, two
// macvlan networks, each interface taking its pool from the pod's resolved
// ipam.spidernet.io/ippools annotation.
func TestTwoInterfacesOfOnePod(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("nic-a", "10.77.13.0/24", []string{"10.77.13.10-10.77.13.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.13.1")))
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("nic-b", "10.77.14.0/24", []string{"10.77.14.10-10.77.14.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.14.1")))
	netA := newNetwork(t, "nic-net-a", "1.1.0", nil)
	netB := newNetwork(t, "nic-net-b", "1.1.0", nil)
	p := newPod(t, "nic-pod", map[string]string{
		annotations.MultusNetworks: "nic-net-a@net1, nic-net-b@net2",
		annotations.IPPools:        `[{"interface":"net1","ipv4":["nic-a"]},{"interface":"net2","ipv4":["nic-b"],"cleangateway":true}]`,
	})
	run := func(nw *network, ifName string, fn func(context.Context, *libcni.NetworkConfigList, *libcni.RuntimeConf) error) error {
		return suite.node.do(func() error { return fn(context.Background(), nw.list, p.runtimeConfFor(ifName)) })
	}
	add := func(nw *network, ifName string) netip.Prefix {
		var res types.Result
		err := suite.node.do(func() (err error) {
			res, err = suite.cni.AddNetworkList(context.Background(), nw.list, p.runtimeConfFor(ifName))
			return err
		})
		if err != nil {
			t.Fatalf("ADD %s: %v", ifName, err)
		}
		t.Cleanup(func() { _ = run(nw, ifName, suite.cni.DelNetworkList) })
		r, err := current.NewResultFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		return addressOf(t, r)
	}
	a, b := add(netA, "net1"), add(netB, "net2")
	if !netip.MustParsePrefix("10.77.13.0/24").Contains(a.Addr()) || !netip.MustParsePrefix("10.77.14.0/24").Contains(b.Addr()) {
		t.Fatalf("net1 got %s and net2 got %s: want nic-a's and nic-b's subnets", a, b)
	}

	var defaults []string
	err := p.netns.Do(func(ns.NetNS) error {
		for ifName, want := range map[string]netip.Prefix{"net1": a, "net2": b} {
			link, err := netlink.LinkByName(ifName)
			if err != nil {
				return err
			}
			addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			if len(addrs) != 1 || addrs[0].IPNet.String() != want.String() {
				t.Errorf("%s holds %v, want only %s", ifName, addrs, want)
			}
		}
		routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
				defaults = append(defaults, r.Gw.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(defaults, []string{"10.77.13.1"}) {
		t.Errorf("default routes via %v: want only net1's, via 10.77.13.1 (net2's entry says cleangateway)", defaults)
	}
	pools := map[string]v2beta1.PoolIPAllocations{"nic-a": allocations(t, "nic-a"), "nic-b": allocations(t, "nic-b")}
	if pools["nic-a"][a.Addr().String()].Interface != "net1" || pools["nic-b"][b.Addr().String()].Interface != "net2" {
		t.Errorf("pools record %v: want %s on net1 and %s on net2", pools, a.Addr(), b.Addr())
	}

	if err := run(netB, "net2", suite.cni.DelNetworkList); err != nil {
		t.Fatalf("DEL net2: %v", err)
	}
	if _, ok := allocations(t, "nic-b")[b.Addr().String()]; ok {
		t.Errorf("nic-b still records %s after DEL of net2", b.Addr())
	}
	if _, ok := allocations(t, "nic-a")[a.Addr().String()]; !ok {
		t.Errorf("DEL of net2 released net1's %s", a.Addr())
	}
	if err := run(netA, "net1", suite.cni.CheckNetworkList); err != nil {
		t.Errorf("CHECK net1 after DEL of net2: %v", err)
	}
}

// TestRepeatedAddReturnsTheSameAddress: a main plugin that retries its IPAM call (after
// its own failure, or a timeout) gets the same address and consumes no other (I2).
func TestRepeatedAddReturnsTheSameAddress(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("again-pool", "10.77.15.0/24", []string{"10.77.15.10-10.77.15.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.15.1")))
	nw := newNetwork(t, "again-net", "1.0.0", map[string]any{"default_ipv4_ippool": []string{"again-pool"}})
	p := newPod(t, "again-a", nil)
	conf, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "again-net", "type": "macvlan", "ipam": nw.ipam})
	if err != nil {
		t.Fatal(err)
	}
	rt := p.runtimeConf()
	args := &invoke.Args{Command: "ADD", ContainerID: rt.ContainerID, NetNS: rt.NetNS, IfName: rt.IfName, PluginArgs: rt.Args, Path: suite.binDir}
	var got []string
	for range 3 {
		res, err := invoke.ExecPluginWithResult(context.Background(), filepath.Join(suite.binDir, "nicpool"), conf, args, nil)
		if err != nil {
			t.Fatalf("ADD: %v", err)
		}
		r, err := current.NewResultFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, addressOf(t, r).String())
	}
	t.Cleanup(func() { _ = nw.del(p) })
	if got[0] != got[1] || got[1] != got[2] {
		t.Errorf("repeated ADD answered %v: want the same address each time", got)
	}
	if a := allocations(t, "again-pool"); len(a) != 1 {
		t.Errorf("again-pool holds %v after three ADDs of one interface: want one address", a)
	}
}
