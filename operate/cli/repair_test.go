package cli_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/operate/inspect"
)

// release --force frees an address only when no pod can still use it.
func TestReleaseRefusesALiveHolder(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "release")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("release-v4", "10.37.0.0/16", []string{"10.37.0.10-10.37.0.40"}))
	live := runPod(t, ns, "live", nic{name: "eth0", v4: "release-v4"})
	liveAddr := endpointAddr(t, live, "eth0", 4)

	_, errOut, code := kubectl(t, "release", liveAddr)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring("give --force"))

	out, errOut, code := kubectl(t, "release", liveAddr, "--force")
	t.Logf("kubectl nicpool release %s --force\n%s%s", liveAddr, out, errOut)
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring(fmt.Sprintf("refused to release %s, nothing was written: pool release-v4: pod %s/live (UID %s) is live (Running) on node %s", liveAddr, ns, live.UID, node)))
	var hs []inspect.Holding
	g.Expect(kubectlJSON(t, &hs, "who", liveAddr)).To(Equal(0), "the live pod keeps its address")
	g.Expect(hs).To(HaveLen(1))
	g.Expect(hs[0].PodUID).To(Equal(string(live.UID)))

	// Terminating within its grace period (no kubelet confirms the deletion): refused.
	slow := runPod(t, ns, "slow", nic{name: "eth0", v4: "release-v4"})
	slowAddr := endpointAddr(t, slow, "eth0", 4)
	g.Expect(env.Client.Delete(ctx, slow, client.GracePeriodSeconds(3600))).To(Succeed())
	_, errOut, code = kubectl(t, "release", slowAddr, "--force")
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring("is terminating and its containers may still run (grace period ends "))
	g.Expect(kubectlJSON(t, &hs, "who", slowAddr)).To(Equal(0))

	// Terminating past its grace period: released once the period is over.
	late := runPod(t, ns, "late", nic{name: "eth0", v4: "release-v4"})
	lateAddr := endpointAddr(t, late, "eth0", 4)
	g.Expect(env.Client.Delete(ctx, late, client.GracePeriodSeconds(1))).To(Succeed())
	g.Eventually(func() int {
		_, _, code := kubectl(t, "release", lateAddr, "--force")
		return code
	}).WithTimeout(time.Minute).Should(Equal(0))

	// Gone: released, through the ledger, and the pool's count follows.
	gone := runPod(t, ns, "gone", nic{name: "eth0", v4: "release-v4"})
	goneAddr := endpointAddr(t, gone, "eth0", 4)
	g.Expect(env.Client.Delete(ctx, gone, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func() string {
		hs = nil
		kubectlJSON(t, &hs, "who", goneAddr)
		return hs[0].Holder.State
	}).WithTimeout(fixtures.Timeout).WithPolling(fixtures.Interval).Should(Equal(inspect.StateGone))
	out, errOut, code = kubectl(t, "release", goneAddr, "--force")
	t.Logf("kubectl nicpool release %s --force\n%s%s", goneAddr, out, errOut)
	g.Expect(code).To(Equal(0), "stderr %s", errOut)
	g.Expect(out).To(Equal(fmt.Sprintf("released %s of pool release-v4, held by pod %s/gone (UID %s) interface eth0 (gone (no pod %s/gone))\n", goneAddr, ns, gone.UID, ns)))
	_, errOut, code = kubectl(t, "who", goneAddr)
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring(goneAddr + ": not allocated"))
	pool := &v2beta1.SpiderIPPool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "release-v4"}, pool)).To(Succeed())
	g.Expect(pool.Status.AllocatedIPCount).NotTo(BeNil())
	g.Expect(*pool.Status.AllocatedIPCount).To(Equal(int64(2)), "live and slow hold the pool's addresses now")

	_, errOut, code = kubectl(t, "release", goneAddr, "--force")
	g.Expect(code).To(Equal(cli.ExitFinding), "nothing left to release")
	g.Expect(errOut).To(ContainSubstring("not allocated"))
}

// check reports a record written by hand into an IPBlock, with the command that
// repairs it; running that command repairs it.
func TestCheckCatchesAHandCorruptedPool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "check")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("check-v4", "10.38.0.0/16", []string{"10.38.0.10-10.38.0.14"}))
	pod := runPod(t, ns, "real", nic{name: "eth0", v4: "check-v4"})
	addr := netip.MustParseAddr(endpointAddr(t, pod, "eth0", 4))

	// Hand-edit the pod's block: a record of a pod that never existed.
	var blocks ipamv1alpha1.IPBlockList
	g.Expect(env.Client.List(ctx, &blocks, client.MatchingFields{ipamv1alpha1.FieldPool: "check-v4"})).To(Succeed())
	g.Expect(blocks.Items).To(HaveLen(1))
	blk := &blocks.Items[0]
	ghost := netip.MustParseAddr("10.38.0.14")
	if ghost == addr {
		ghost = netip.MustParseAddr("10.38.0.13")
	}
	blk.Status.Allocations[ghost.String()] = v2beta1.PoolIPAllocation{Pod: ns + "/ghost", PodUID: "ghost-uid", Interface: "eth0"}
	g.Expect(env.Client.Update(ctx, blk)).To(Succeed())

	out, errOut, code := kubectl(t, "check")
	t.Logf("kubectl nicpool check\n%s%s", out, errOut)
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("I4: check-v4/%s is held by pod %s/ghost UID ghost-uid, which is gone\n    repair: kubectl nicpool release %s --force\n", ghost, ns, ghost)))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("IPBlock %s: status.allocated is 1 but 2 addresses are recorded\n    repair: cannot be repaired automatically: IPBlock %s was written by hand; releasing any of its addresses (kubectl nicpool release ADDRESS --force) writes it again with counts that agree", blk.Name, blk.Name)),
		"every violation comes with its repair line")
	g.Expect(errOut).To(MatchRegexp(`error: \d+ violations`))
	vs, err := invariants.Violations(ctx, env.Client, invariants.Options{Converged: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vs).To(ContainElements(
		invariants.Violation{Kind: invariants.RecordGone, Pool: "check-v4", Address: ghost, Pod: ns + "/ghost", PodUID: "ghost-uid",
			Message: fmt.Sprintf("I4: check-v4/%s is held by pod %s/ghost UID ghost-uid, which is gone", ghost, ns)},
		invariants.Violation{Kind: invariants.Malformed, Pool: "check-v4", Block: blk.Name,
			Message: fmt.Sprintf("IPBlock %s: status.allocated is 1 but 2 addresses are recorded", blk.Name)},
	), "check's lines are these violations' messages, each with its parts")

	out, errOut, code = kubectl(t, "release", ghost.String(), "--force")
	g.Expect(code).To(Equal(0), "the repair command runs: %s%s", out, errOut)

	out, _, _ = kubectl(t, "check")
	g.Expect(out).NotTo(ContainSubstring(ghost.String()), "repaired")
	g.Expect(out).NotTo(ContainSubstring(blk.Name), "the block's counts are right again")
	var hs []inspect.Holding
	g.Expect(kubectlJSON(t, &hs, "who", addr.String())).To(Equal(0), "the real pod keeps its address")
	g.Expect(hs[0].PodUID).To(Equal(string(pod.UID)))
	g.Expect(strings.Count(out, "check-v4")).To(Equal(0))
}

// release --from-report frees only what every report and a check now find held by a
// gone pod; --dry-run writes nothing.
func TestReleaseFromReports(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "reports")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("reports-v4", "10.44.0.0/16", []string{"10.44.0.10-10.44.0.14"}))
	pod := runPod(t, ns, "real", nic{name: "eth0", v4: "reports-v4"})
	real := endpointAddr(t, pod, "eth0", 4)
	ghostIn := func(addr string) {
		t.Helper()
		var blocks ipamv1alpha1.IPBlockList
		g.Expect(env.Client.List(ctx, &blocks, client.MatchingFields{ipamv1alpha1.FieldPool: "reports-v4"})).To(Succeed())
		g.Expect(blocks.Items).To(HaveLen(1))
		blk := &blocks.Items[0]
		blk.Status.Allocations[addr] = v2beta1.PoolIPAllocation{Pod: ns + "/ghost-" + addr, PodUID: "ghost-" + addr, Interface: "eth0"}
		g.Expect(env.Client.Update(ctx, blk)).To(Succeed())
	}
	free := []string{}
	for _, a := range []string{"10.44.0.13", "10.44.0.14", "10.44.0.12"} {
		if a != real {
			free = append(free, a)
		}
	}
	first, second := free[0], free[1]
	dir := t.TempDir()
	report := func(name string) string {
		t.Helper()
		out, errOut, code := kubectl(t, "check", "-o", "json")
		g.Expect(code).To(Equal(cli.ExitFinding), errOut)
		path := dir + "/" + name
		g.Expect(os.WriteFile(path, []byte(out), 0o600)).To(Succeed())
		return path
	}
	ghostIn(first)
	r1 := report("r1.json")
	ghostIn(second)
	r2 := report("r2.json")

	_, errOut, code := kubectl(t, "release", "--from-report", r1, "--force")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring("less than --min-interval 5m0s: take it again later"))

	out, errOut, code := kubectl(t, "release", "--from-report", r1, "--from-report", r2, "--dry-run", "--min-interval=0s")
	t.Logf("release --from-report r1 --from-report r2 --dry-run\n%s%s", out, errOut)
	g.Expect(code).To(Equal(0), errOut)
	// (Records other tests left to pods that are gone are released too: rightly.)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	g.Expect(lines).To(ContainElement(fmt.Sprintf("would release %s of pool reports-v4, held by pod %s/ghost-%s (UID ghost-%s) interface eth0 (gone (no pod %s/ghost-%s))", first, ns, first, first, ns, first)))
	g.Expect(out).NotTo(ContainSubstring(second))
	g.Expect(out).NotTo(ContainSubstring(" " + real + " "))
	var hs []inspect.Holding
	kubectlJSON(t, &hs, "who", first)
	g.Expect(hs).To(HaveLen(1), "a dry run writes nothing")

	out, errOut, code = kubectl(t, "release", "--from-report", r1, "--from-report", r2, "--force", "--min-interval=0s")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(strings.Split(out, "\n")).To(ContainElement(HavePrefix("released " + first + " of pool reports-v4")))
	g.Expect(out).NotTo(ContainSubstring(second))
	_, errOut, code = kubectl(t, "who", first)
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring(first + ": not allocated"))
	hs = nil
	kubectlJSON(t, &hs, "who", second)
	g.Expect(hs).To(HaveLen(1), "only in the second report: kept")
	g.Expect(kubectlJSON(t, &hs, "who", real)).To(Equal(0), "the live pod keeps its address")
	g.Expect(hs[0].PodUID).To(Equal(string(pod.UID)))

	// A single address: --dry-run, then a live holder refused.
	out, _, code = kubectl(t, "release", second, "--dry-run")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(HavePrefix("would release " + second))
	_, errOut, code = kubectl(t, "release", real, "--dry-run")
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring("refused to release " + real + ", nothing was written: pool reports-v4: pod " + ns + "/real"))
	out, _, code = kubectl(t, "release", second, "--force")
	g.Expect(code).To(Equal(0), out)

	_, errOut, code = kubectl(t, "release", "--from-report", dir+"/missing.json", "--force")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring("--from-report: open "))
	g.Expect(os.WriteFile(dir+"/pools.json", []byte(`{"apiVersion":"nicpool.io/v1alpha1","kind":"PoolUsageList","items":[]}`), 0o600)).To(Succeed())
	_, errOut, code = kubectl(t, "release", "--from-report", dir+"/pools.json", "--force")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring(`kind "PoolUsageList": want nicpool.io/v1alpha1 ViolationList`))
}

// An address recorded in two pools (pools that overlap, made without the webhook),
// one record a live pod's and the other a gone pod's: check's repair names the pool,
// release of the address alone refuses for the live pod, and release --pool frees the
// gone pod's record while the live pod keeps its own.
func TestReleaseOnePoolOfAnAddressInTwoPools(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "twins")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("twin-a", "10.36.0.0/24", []string{"10.36.0.10"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("twin-b", "10.36.0.0/24", []string{"10.36.0.10"}))
	live := runPod(t, ns, "live", nic{name: "eth0", v4: "twin-a"})
	gone := runPod(t, ns, "gone", nic{name: "eth0", v4: "twin-b"})
	const addr = "10.36.0.10"
	g.Expect(endpointAddr(t, live, "eth0", 4)).To(Equal(addr))
	g.Expect(endpointAddr(t, gone, "eth0", 4)).To(Equal(addr))
	g.Expect(env.Client.Delete(ctx, gone, client.GracePeriodSeconds(0))).To(Succeed())

	out, errOut, code := kubectl(t, "check")
	t.Logf("kubectl nicpool check\n%s%s", out, errOut)
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(out).To(ContainSubstring("I3: " + addr + " is allocated in pool "))
	g.Expect(out).To(ContainSubstring("release " + addr + " --pool POOL --force frees the record of pool POOL once its pod is gone"))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("I4: twin-b/%s is held by pod %s/gone UID %s, which is gone\n    repair: kubectl nicpool release %s --pool twin-b --force\n", addr, ns, gone.UID, addr)))

	_, errOut, code = kubectl(t, "release", addr, "--force")
	g.Expect(code).To(Equal(cli.ExitFinding), "the live pod's record is judged too")
	g.Expect(errOut).To(ContainSubstring(fmt.Sprintf("pool twin-a: pod %s/live (UID %s) is live", ns, live.UID)))

	_, errOut, code = kubectl(t, "release", addr, "--pool", "twin-c", "--force")
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring("not allocated in pool twin-c"))

	out, errOut, code = kubectl(t, "release", addr, "--pool", "twin-b", "--force")
	g.Expect(code).To(Equal(0), "%s%s", out, errOut)
	g.Expect(out).To(Equal(fmt.Sprintf("released %s of pool twin-b, held by pod %s/gone (UID %s) interface eth0 (gone (no pod %s/gone))\n", addr, ns, gone.UID, ns)))

	var hs []inspect.Holding
	g.Expect(kubectlJSON(t, &hs, "who", addr)).To(Equal(0))
	g.Expect(hs).To(ConsistOf(And(HaveField("Pool", "twin-a"), HaveField("PodUID", string(live.UID)))), "the live pod keeps its record")
	// No garbage collector runs here: the gone pod's endpoint is deleted as check's
	// repair of it says a cluster admin does.
	out, _, _ = kubectl(t, "check")
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("kubectl delete spiderendpoint -n %s gone", ns)))
	g.Expect(env.Client.Delete(ctx, &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}})).To(Succeed())
	g.Eventually(func() string {
		out, _, _ := kubectl(t, "check")
		return out
	}).WithTimeout(fixtures.Timeout).WithPolling(fixtures.Interval).ShouldNot(ContainSubstring(addr), "repaired")
}

// A pod interface holding two addresses of a family (a record added by hand): check's
// repair names the pod; release refuses its records while it is live, and frees each
// once it is gone.
func TestTwoAddressesOfOnePodInterface(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "two")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("two-v4", "10.35.0.0/16", []string{"10.35.0.10-10.35.0.14"}))
	pod := runPod(t, ns, "web", nic{name: "eth0", v4: "two-v4"})
	addr := netip.MustParseAddr(endpointAddr(t, pod, "eth0", 4))
	extra := addr.Next()

	var blocks ipamv1alpha1.IPBlockList
	g.Expect(env.Client.List(ctx, &blocks, client.MatchingFields{ipamv1alpha1.FieldPool: "two-v4"})).To(Succeed())
	g.Expect(blocks.Items).To(HaveLen(1))
	blk := &blocks.Items[0]
	blk.Status.Allocations[extra.String()] = v2beta1.PoolIPAllocation{Pod: ns + "/web", PodUID: string(pod.UID), Interface: "eth0"}
	blk.Status.Allocated++
	blk.Status.Free--
	g.Expect(env.Client.Update(ctx, blk)).To(Succeed())

	out, _, code := kubectl(t, "check")
	t.Logf("kubectl nicpool check\n%s", out)
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("I2: pod UID %s interface \"eth0\" holds 2 IPv4 addresses", pod.UID)))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("repair: both records are pod %s/web's (kubectl nicpool pod %s/web shows the one its SpiderEndpoint lists); release refuses a live pod's records: delete the pod (kubectl delete pod -n %s web)", ns, ns, ns)))

	_, errOut, code := kubectl(t, "release", extra.String(), "--force")
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring("is live"))

	g.Expect(env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	for _, a := range []netip.Addr{addr, extra} {
		out, errOut, code := kubectl(t, "release", a.String(), "--force")
		g.Expect(code).To(Equal(0), "%s%s", out, errOut)
	}
	out, _, _ = kubectl(t, "check")
	g.Expect(out).NotTo(ContainSubstring("I2: pod UID "+string(pod.UID)), "repaired")
	g.Expect(out).NotTo(ContainSubstring("two-v4/"), "no record of the pod is left")
}
