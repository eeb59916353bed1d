package cli_test

import (
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/operate/inspect"
)

// endpointAddr returns the address the pod's SpiderEndpoint records for an interface
// and family, as ipamd wrote it.
func endpointAddr(t *testing.T, pod *corev1.Pod, iface string, family int) string {
	t.Helper()
	ep := &v2beta1.SpiderEndpoint{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), ep); err != nil {
		t.Fatal(err)
	}
	for _, d := range ep.Status.Current.IPs {
		if d.Interface != iface {
			continue
		}
		s := d.IPv6
		if family == 4 {
			s = d.IPv4
		}
		if s != nil {
			return netip.MustParsePrefix(*s).Addr().String()
		}
	}
	t.Fatalf("endpoint %s/%s has no IPv%d address on %s", pod.Namespace, pod.Name, family, iface)
	return ""
}

func TestWhoNamesTheHolderOfAnAddress(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "who")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("who-v4", "10.31.0.0/16", []string{"10.31.0.10-10.31.0.20"}, withGateway("10.31.0.1")))
	pod := runPod(t, ns, "web-0", nic{name: "eth0", v4: "who-v4"})
	addr := endpointAddr(t, pod, "eth0", 4)

	out, errOut, code := kubectl(t, "who", addr)
	t.Logf("kubectl nicpool who %s\n%s", addr, out)
	g.Expect(code).To(Equal(0), "stdout %s\nstderr %s", out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	g.Expect(lines).To(HaveLen(2))
	g.Expect(strings.Fields(lines[0])).To(Equal([]string{"POOL", "ADDRESS", "POD", "POD", "UID", "INTERFACE", "NODE", "STATE"}))
	g.Expect(strings.Fields(lines[1])).To(Equal([]string{"who-v4", addr, ns + "/web-0", string(pod.UID), "eth0", node, "live", "(Running)"}))

	var hs []inspect.Holding
	g.Expect(kubectlJSON(t, &hs, "who", addr)).To(Equal(0))
	g.Expect(hs).To(HaveLen(1))
	g.Expect(hs[0]).To(holdingOf(ns, pod))

	out, _, _ = kubectl(t, "who", addr, "-o", "wide")
	g.Expect(out).To(ContainSubstring("ENDPOINT"))
	g.Expect(out).To(ContainSubstring("agrees"))

	// An address of a pool that nobody holds: exit 1, naming the pool.
	_, errOut, code = kubectl(t, "who", "10.31.0.20")
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(errOut).To(ContainSubstring("10.31.0.20: not allocated (in the subnet of pool who-v4)"))

	_, errOut, code = kubectl(t, "who", "10.31.0.300")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring(`ADDRESS "10.31.0.300": must be an IPv4 or IPv6 address`))

	_, errOut, code = kubectl(t, "who", addr, "-o", "table")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring(`--output "table": must be one of wide, json, yaml, kyaml, name, go-template`))

	// The holder deleted: who says it is gone.
	g.Expect(env.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func() string {
		var hs []inspect.Holding
		kubectlJSON(t, &hs, "who", addr)
		return hs[0].Holder.State
	}).WithTimeout(fixtures.Timeout).WithPolling(fixtures.Interval).Should(Equal(inspect.StateGone))
}

// holdingOf matches the holding of a test pod's eth0 address.
func holdingOf(ns string, pod *corev1.Pod) OmegaMatcher {
	return And(
		WithTransform(func(h inspect.Holding) string { return h.Pool }, Equal("who-v4")),
		WithTransform(func(h inspect.Holding) string { return h.Pod }, Equal(ns+"/"+pod.Name)),
		WithTransform(func(h inspect.Holding) string { return h.PodUID }, Equal(string(pod.UID))),
		WithTransform(func(h inspect.Holding) string { return h.Interface }, Equal("eth0")),
		WithTransform(func(h inspect.Holding) string { return h.Holder.Node }, Equal(node)),
		WithTransform(func(h inspect.Holding) string { return h.Endpoint }, BeEmpty()),
	)
}

func TestPodShowsEveryInterface(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "pod")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("pod-eth0", "10.32.0.0/16", []string{"10.32.0.10-10.32.0.20"}, withGateway("10.32.0.1")))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("pod-net1-v4", "10.33.0.0/16", []string{"10.33.0.10-10.33.0.20"},
		withGateway("10.33.0.1", v2beta1.Route{Dst: "10.99.0.0/16", Gw: "10.33.0.254"})))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("pod-net1-v6", "fd00:33::/64", []string{"fd00:33::10-fd00:33::20"}, withGateway("fd00:33::1")))
	pod := runPod(t, ns, "db-0",
		nic{name: "eth0", v4: "pod-eth0"},
		nic{name: "net1", network: ns + "/macvlan", v4: "pod-net1-v4", v6: "pod-net1-v6"})
	eth0, v4, v6 := endpointAddr(t, pod, "eth0", 4), endpointAddr(t, pod, "net1", 4), endpointAddr(t, pod, "net1", 6)

	out, errOut, code := kubectl(t, "pod", "db-0", "-n", ns)
	t.Logf("kubectl nicpool pod db-0 -n %s\n%s", ns, out)
	wide, _, _ := kubectl(t, "pod", "db-0", "-n", ns, "-o", "wide")
	t.Logf("kubectl nicpool pod db-0 -n %s -o wide\n%s", ns, wide)
	g.Expect(code).To(Equal(0), "stdout %s\nstderr %s", out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	g.Expect(lines[0]).To(Equal("Pod pod/db-0  UID " + string(pod.UID) + "  node " + node + "  live (Running)"))
	g.Expect(strings.Fields(lines[2])).To(Equal([]string{"INTERFACE", "NETWORK", "FAMILY", "ADDRESS", "POOL", "GATEWAY", "ROUTES", "AGREES"}))
	g.Expect(lines[3:]).To(HaveLen(3))
	g.Expect(strings.Fields(lines[3])).To(Equal([]string{"eth0", "(cluster", "network)", "IPv4", eth0 + "/16", "pod-eth0", "10.32.0.1", "-", "yes"}))
	g.Expect(strings.Fields(lines[4])).To(Equal([]string{"net1", ns + "/macvlan", "IPv4", v4 + "/16", "pod-net1-v4", "10.33.0.1", "10.99.0.0/16", "via", "10.33.0.254", "yes"}))
	g.Expect(strings.Fields(lines[5])).To(Equal([]string{"net1", ns + "/macvlan", "IPv6", v6 + "/64", "pod-net1-v6", "fd00:33::1", "10.99.0.0/16", "via", "10.33.0.254", "yes"}))

	var rep inspect.PodReport
	g.Expect(kubectlJSON(t, &rep, "pod", "db-0", "--namespace", ns)).To(Equal(0))
	g.Expect(rep.UID).To(Equal(string(pod.UID)))
	g.Expect(rep.Interfaces).To(HaveLen(2))
	g.Expect(rep.Interfaces[1].Addresses).To(HaveLen(2))

	_, errOut, code = kubectl(t, "pod", "nobody", "-n", ns)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring(`pods "nobody" not found`))

	// kubectl get se shows both interfaces in its ADDRESSES column, as the API server
	// prints it.
	get := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", env.Kubeconfig, "get", "se", "db-0", "-n", ns)
	table, err := get.CombinedOutput()
	t.Logf("kubectl get se db-0 -n %s\n%s", ns, table)
	g.Expect(err).NotTo(HaveOccurred())
	rows := strings.Split(strings.TrimSpace(string(table)), "\n")
	g.Expect(rows).To(HaveLen(2))
	g.Expect(strings.Fields(rows[0])).To(Equal([]string{"NAME", "ADDRESSES", "NODE", "AGE"}))
	g.Expect(rows[1]).To(HavePrefix("db-0 "))
	g.Expect(rows[1]).To(ContainSubstring(" eth0 " + eth0 + "/16, net1 " + v4 + "/16 " + v6 + "/64 "))
	g.Expect(rows[1]).To(ContainSubstring(" " + node + " "))
}

func TestPoolsFullestFirst(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "pools")
	ctx := context.Background()
	// 11 addresses, 10 allocatable after the reservation; 2 used below.
	fixtures.CreatePool(t, env.Client, fixtures.Pool("pools-small", "10.34.0.0/16", []string{"10.34.0.10-10.34.0.20"},
		func(p *v2beta1.SpiderIPPool) { p.Spec.NamespaceName = []string{ns} }))
	g.Expect(env.Client.Create(ctx, &v2beta1.SpiderReservedIP{
		ObjectMeta: metav1.ObjectMeta{Name: "pools-reserved"},
		Spec:       v2beta1.ReservedIPSpec{IPs: []string{"10.34.0.20"}},
	})).To(Succeed())
	// 100 addresses, 1 used.
	fixtures.CreatePool(t, env.Client, fixtures.Pool("pools-big", "10.35.0.0/16", []string{"10.35.0.1-10.35.0.100"},
		func(p *v2beta1.SpiderIPPool) {
			p.Spec.Default = ptr.To(true)
			p.Spec.PodAffinity = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		}))
	// Terminating: a finalizer holds it.
	going := fixtures.CreatePool(t, env.Client, fixtures.Pool("pools-going", "10.36.0.0/16", []string{"10.36.0.1-10.36.0.4"},
		func(p *v2beta1.SpiderIPPool) { p.Finalizers = []string{"test.nicpool.io/hold"} }))
	g.Expect(env.Client.Delete(ctx, going)).To(Succeed())
	t.Cleanup(func() {
		going.Finalizers = nil
		_ = env.Client.Update(ctx, going)
	})
	runPod(t, ns, "a", nic{name: "eth0", v4: "pools-small"})
	runPod(t, ns, "b", nic{name: "eth0", v4: "pools-small"})
	runPodWith(t, ns, "c", map[string]string{"app": "web"}, nic{name: "eth0", v4: "pools-big"})

	var reps []inspect.PoolReport
	g.Eventually(func() bool {
		reps = nil
		kubectlJSON(t, &reps, "pools")
		return terminating(reps, "pools-going")
	}).WithTimeout(fixtures.Timeout).WithPolling(fixtures.Interval).Should(BeTrue())
	byName := map[string]inspect.PoolReport{}
	var order []string
	for _, p := range reps {
		if strings.HasPrefix(p.Name, "pools-") {
			byName[p.Name] = p
			order = append(order, p.Name)
		}
	}
	g.Expect(order).To(Equal([]string{"pools-small", "pools-big", "pools-going"}))
	g.Expect(byName["pools-small"]).To(Equal(inspect.PoolReport{Name: "pools-small", Family: 4, Subnet: "10.34.0.0/16",
		Used: 2, Free: 8, Total: 10, Reserved: 1, Affinity: "namespaces=" + ns}))
	g.Expect(byName["pools-big"]).To(Equal(inspect.PoolReport{Name: "pools-big", Family: 4, Subnet: "10.35.0.0/16",
		Used: 1, Free: 99, Total: 100, Default: true, Affinity: "pods={app=web}"}))
	g.Expect(byName["pools-going"].Free).To(Equal(int64(4)))

	out, _, code := kubectl(t, "pools")
	t.Logf("kubectl nicpool pools\n%s", out)
	g.Expect(code).To(Equal(0))
	var small []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "pools-small ") {
			small = strings.Fields(l)
		}
	}
	g.Expect(small).To(Equal([]string{"pools-small", "10.34.0.0/16", "2", "8", "10", "1", "false", "false", "namespaces=" + ns}))
}

func terminating(reps []inspect.PoolReport, name string) bool {
	for _, p := range reps {
		if p.Name == name {
			return p.Terminating
		}
	}
	return false
}
