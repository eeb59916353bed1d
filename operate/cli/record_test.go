package cli_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/operate/inspect"
)

// eraseRecord removes addr's record from the pool's block, as a hand edit would: the
// pod's endpoint still lists the address, no record holds it.
func eraseRecord(t *testing.T, pool string, addr netip.Addr) {
	t.Helper()
	ctx := context.Background()
	var blocks ipamv1alpha1.IPBlockList
	if err := env.Client.List(ctx, &blocks, client.MatchingFields{ipamv1alpha1.FieldPool: pool}); err != nil {
		t.Fatal(err)
	}
	for i := range blocks.Items {
		b := &blocks.Items[i]
		if _, ok := b.Status.Allocations[addr.String()]; ok {
			delete(b.Status.Allocations, addr.String())
			if err := env.Client.Update(ctx, b); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no block of pool %s records %s", pool, addr)
}

// An address a live pod's endpoint lists with no record holding it: check names the
// repair, record writes the record for that pod, and refuses what it must not write.
func TestRecordRepairsAnUnrecordedEndpointAddress(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "record")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("record-v4", "10.42.0.0/16", []string{"10.42.0.10-10.42.0.20"}))
	pod := runPod(t, ns, "web-0", nic{name: "eth0", v4: "record-v4"})
	gone := runPod(t, ns, "gone-0", nic{name: "eth0", v4: "record-v4"})
	addr := netip.MustParseAddr(endpointAddr(t, pod, "eth0", 4))
	goneAddr := netip.MustParseAddr(endpointAddr(t, gone, "eth0", 4))
	eraseRecord(t, "record-v4", addr)
	eraseRecord(t, "record-v4", goneAddr)
	// The second pod goes without a CNI DEL: its endpoint stays behind.
	g.Expect(env.Client.Delete(ctx, gone, client.GracePeriodSeconds(0))).To(Succeed())

	out, _, code := kubectl(t, "check")
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("endpoint %s/web-0 interface eth0: %s is not recorded in pool record-v4\n    repair: kubectl nicpool record %s --force: ", ns, addr, addr)))

	out, errOut, code := kubectl(t, "record", addr.String(), "--dry-run")
	g.Expect(code).To(Equal(0), "%s%s", out, errOut)
	g.Expect(out).To(Equal(fmt.Sprintf("would record %s in pool record-v4 for pod %s/web-0 (UID %s) interface eth0\n", addr, ns, pod.UID)))
	_, _, code = kubectl(t, "who", addr.String())
	g.Expect(code).To(Equal(cli.ExitFinding), "a dry run writes nothing")

	out, errOut, code = kubectl(t, "record", addr.String(), "--force")
	g.Expect(code).To(Equal(0), "%s%s", out, errOut)
	g.Expect(out).To(Equal(fmt.Sprintf("recorded %s in pool record-v4 for pod %s/web-0 (UID %s) interface eth0\n", addr, ns, pod.UID)))
	var hs []inspect.Holding
	g.Expect(kubectlJSON(t, &hs, "who", addr.String())).To(Equal(0), "the record agrees with the endpoint")
	g.Expect(hs).To(HaveLen(1))
	g.Expect(hs[0].PodUID).To(Equal(string(pod.UID)))
	g.Expect(hs[0].Holder.State).To(Equal(inspect.StateLive))
	out, _, _ = kubectl(t, "check")
	g.Expect(out).NotTo(ContainSubstring(addr.String()+" is not recorded"), "repaired")
	var pools []inspect.PoolReport
	kubectlJSON(t, &pools, "pools")
	for _, p := range pools {
		if p.Name == "record-v4" {
			g.Expect(p.Used).To(BeEquivalentTo(1), "the pool counts the record again")
		}
	}

	// What record must not write, each refused with nothing written.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{addr.String(), "--force"}, cli.ExitFinding, fmt.Sprintf("refused to record %s, nothing was written: pool record-v4 records %s for pod %s/web-0", addr, addr, ns)},
		{[]string{goneAddr.String(), "--force"}, cli.ExitFinding, fmt.Sprintf("refused to record %s, nothing was written: the endpoint's pod %s/gone-0 (UID %s) is gone", goneAddr, ns, gone.UID)},
		{[]string{"10.42.0.99", "--force"}, cli.ExitFinding, "10.42.0.99: no SpiderEndpoint lists the address: there is nothing to record"},
		{[]string{addr.String()}, cli.ExitError, "give --force to write the record, or --dry-run"},
		{[]string{addr.String(), "--force", "--dry-run"}, cli.ExitError, "give --force to write the record, or --dry-run"},
		{[]string{"10.42.0", "--force"}, cli.ExitError, `ADDRESS "10.42.0": must be an IPv4 or IPv6 address`},
	} {
		_, errOut, code := kubectl(t, append([]string{"record"}, tc.args...)...)
		g.Expect(code).To(Equal(tc.code), "record %v: %s", tc.args, errOut)
		g.Expect(errOut).To(ContainSubstring(tc.says), "record %v", tc.args)
	}
	_, _, code = kubectl(t, "who", goneAddr.String())
	g.Expect(code).To(Equal(cli.ExitFinding), "the gone pod's address stays unrecorded")
}
