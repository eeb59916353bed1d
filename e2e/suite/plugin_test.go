package suite

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
)

// newNetworkAttachment creates a macvlan network on the nodes' eth1 uplink with the
// given ipam section, as a tenant would in their namespace.
func newNetworkAttachment(ctx SpecContext, ns, name string, ipam map[string]any) {
	GinkgoHelper()
	config, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": name, "type": "macvlan", "master": "eth1", "mode": "bridge", "ipam": ipam,
	})
	Expect(err).NotTo(HaveOccurred())
	nad := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: string(config)},
	}
	Expect(stack.Client.Create(ctx, nad)).To(Succeed())
}

// directoriesUnder lists the directories beneath dir, relative to it and sorted.
func directoriesUnder(dir string) []string {
	GinkgoHelper()
	var out []string
	Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out = append(out, rel)
		return err
	})).To(Succeed())
	sort.Strings(out)
	return out
}

// onNode pins a pod to a node.
func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	return p
}

var _ = Describe("the CNI plugin run as root", func() {
	It("refuses a NetworkAttachmentDefinition that aims its log or socket outside its directories or through a symlink, and touches nothing there", func(ctx SpecContext) {
		ns := newNamespace(ctx, "paths")
		node := specNodes()[0]
		outside, err := os.MkdirTemp(stack.Dir, "outside-")
		Expect(err).NotTo(HaveOccurred())
		precious := filepath.Join(outside, "precious")
		Expect(os.WriteFile(precious, []byte("precious\n"), 0o600)).To(Succeed())
		listener, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(outside, "x.sock"), Net: "unix"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(listener.Close)
		By("planting symlinks to them in the node's " + cniplugin.LogDir + " and " + cniplugin.RunDir)
		// A real node has no log directory until something logs there.
		Expect(os.MkdirAll(node.LogDir(), 0o755)).To(Succeed())
		for link, target := range map[string]string{
			filepath.Join(node.LogDir(), "planted.log"):  precious,
			filepath.Join(node.RunDir(), "planted.sock"): listener.Addr().String(),
		} {
			Expect(os.Symlink(target, link)).To(Succeed())
			DeferCleanup(os.Remove, link)
		}
		before, err := testenv.Snapshot(outside)
		Expect(err).NotTo(HaveOccurred())

		cases := []struct{ network, key, path string }{
			{"log-outside", "log_file_path", filepath.Join(outside, "new.log")},
			{"log-symlink", "log_file_path", cniplugin.LogDir + "/planted.log"},
			{"socket-outside", "ipam_unix_socket_path", listener.Addr().String()},
			{"socket-symlink", "ipam_unix_socket_path", cniplugin.RunDir + "/planted.sock"},
		}
		var pods []*corev1.Pod
		for _, c := range cases {
			newNetworkAttachment(ctx, ns, c.network, map[string]any{"type": "nicpool", "default_ipv4_ippool": []string{"net1-v4"}, c.key: c.path})
			p := onNode(newPod(ns, c.network, map[string]string{annotations.MultusNetworks: c.network}), node.Name())
			Expect(stack.Client.Create(ctx, p)).To(Succeed())
			pods = append(pods, p)
		}
		By("each pod's sandbox failing with the kubelet's event naming the key")
		for i, c := range cases {
			p := pods[i]
			Eventually(func(g Gomega) {
				g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(strings.Join(podEvents(ctx, p, "FailedCreatePodSandBox"), "\n")).To(ContainSubstring("ipam." + c.key))
			}).WithContext(ctx).Should(Succeed())
			Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		}
		By("the pods going when deleted (DEL does without the refused key)")
		deleteAllPods(ctx, ns)

		By("nothing outside created, written or connected to")
		after, err := testenv.Snapshot(outside)
		Expect(err).NotTo(HaveOccurred())
		Expect(maps.Equal(before, after)).To(BeTrue(), "before %v\nafter  %v", before, after)
		Expect(testenv.ConnectedTo(listener)).To(BeFalse())
		checkInvariants(ctx)
	})

	It("creates no directory for a log_file_path 40 directories deep (the pod's ADD fails naming the key), and the one directory of a path one deep", func(ctx SpecContext) {
		ns := newNamespace(ctx, "deeplog")
		node := specNodes()[0]
		// A real node has no log directory until something logs there.
		Expect(os.MkdirAll(node.LogDir(), 0o755)).To(Succeed())
		before := directoriesUnder(node.LogDir())
		deep := cniplugin.LogDir + strings.Repeat("/d", 40) + "/x.log"
		newNetworkAttachment(ctx, ns, "deep-log", map[string]any{"type": "nicpool", "default_ipv4_ippool": []string{"net1-v4"}, "log_file_path": deep})
		newNetworkAttachment(ctx, ns, "one-deep-log", map[string]any{"type": "nicpool", "default_ipv4_ippool": []string{"net1-v4"}, "log_file_path": cniplugin.LogDir + "/" + ns + "/cni.log"})
		DeferCleanup(os.RemoveAll, filepath.Join(node.LogDir(), ns))

		By("a pod on the 40-level network: its ADD fails with the kubelet's event naming ipam.log_file_path")
		p := onNode(newPod(ns, "deep", map[string]string{annotations.MultusNetworks: "deep-log"}), node.Name())
		Expect(stack.Client.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(strings.Join(podEvents(ctx, p, "FailedCreatePodSandBox"), "\n")).To(ContainSubstring("ipam.log_file_path"))
		}).WithContext(ctx).Should(Succeed())
		Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		Expect(allocationsOf(ctx, ns+"/deep")).NotTo(ContainElement(HavePrefix("net1-v4 ")), "the refused interface holds nothing")
		Expect(directoriesUnder(node.LogDir())).To(ConsistOf(before), "directories beneath %s after the refused ADD", node.LogDir())

		By("a pod on the network logging one directory deep: running, its log in the one new directory")
		Expect(stack.Client.Create(ctx, onNode(newPod(ns, "one-deep", map[string]string{annotations.MultusNetworks: "one-deep-log"}), node.Name()))).To(Succeed())
		Expect(nicAddresses(runningPod(ctx, ns, "one-deep", ""))["net1"]).To(HaveLen(1))
		Expect(directoriesUnder(node.LogDir())).To(ConsistOf(slices.Concat(before, []string{ns})))
		Expect(filepath.Join(node.LogDir(), ns, "cni.log")).To(BeARegularFile())

		By("both pods going when deleted, the refused one too (DEL does without the refused key)")
		deleteAllPods(ctx, ns)
		Expect(allocationsOf(ctx, ns+"/one-deep")).To(BeEmpty())
		Expect(directoriesUnder(node.LogDir())).To(ConsistOf(slices.Concat(before, []string{ns})))
		checkInvariants(ctx)
	})

	It("serves a network written for spiderpool (type spiderpool, its keys and default paths), and releases through it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "spiderpool")
		newNetworkAttachment(ctx, ns, "spider-net", map[string]any{
			"type":                  cniplugin.NameSpiderpool,
			"default_ipv4_ippool":   []string{"net1-v4"},
			"ipam_unix_socket_path": "/var/run/spidernet/spiderpool.sock",
			"log_file_path":         "/var/log/spidernet/spiderpool.log",
			"log_file_max_size":     100,
			"log_file_max_count":    7,
			"log_level":             "DEBUG",
			"match_master_subnet":   false,
		})
		Expect(stack.Client.Create(ctx, newPod(ns, "app", map[string]string{annotations.MultusNetworks: "spider-net"}))).To(Succeed())
		p := runningPod(ctx, ns, "app", "")
		Expect(nicAddresses(p)["net1"]).To(HaveLen(1))
		Expect(allocationsOf(ctx, ns+"/app")).To(ContainElement(HavePrefix("net1-v4 " + nicAddresses(p)["net1"][0] + " net1")))

		Expect(stack.Client.Delete(ctx, p)).To(Succeed())
		Eventually(func() error { return stack.Client.Get(ctx, client.ObjectKeyFromObject(p), p) }).WithContext(ctx).Should(MatchError(ContainSubstring("not found")))
		Expect(allocationsOf(ctx, ns+"/app")).To(BeEmpty(), "DEL through the spiderpool name released at once")
		checkInvariants(ctx)
	})
})

// Stand-ins only for now: it stops a stand-in node's ipamd process (stack.Nodes); a
// real-node version stops the DaemonSet's pod on one node.
var _ = describeFor(local.NodeStandIn, "pods deleted while their node's ipamd is down", func() {
	It("finish terminating; the garbage collector releases their addresses (scaled-away StatefulSet ordinals included) and ADD on that node waits for ipamd", func(ctx SpecContext) {
		ns := newNamespace(ctx, "ipamd-down")
		node := stack.Nodes[1].Name()
		web := map[string]string{"app": "web"}
		t := podTemplate(web, twoNICAnnotations(unnamedTwoNICs))
		t.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec:       appsv1.DeploymentSpec{Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: t},
		}
		Expect(stack.Client.Create(ctx, deploy)).To(Succeed())
		sts := newStatefulSet(ns, "db", 2, twoNICAnnotations(unnamedTwoNICs))
		sts.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		Expect(stack.Client.Create(ctx, sts)).To(Succeed())
		gone := runningPods(ctx, ns, web, 2)
		dbs := runningPods(ctx, ns, map[string]string{"app": "db"}, 2)
		var db1 corev1.Pod
		for _, p := range dbs {
			if p.Name == "db-1" {
				db1 = p
			}
		}
		gone = append(gone, db1)
		for _, p := range gone {
			Expect(allocationsOf(ctx, ns+"/"+p.Name)).To(HaveLen(4), "pod %s", p.Name)
		}

		By("stopping ipamd on " + node + ", as a DaemonSet rollout or an uninstall does")
		Expect(stack.StopIpamd(node, 0)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = stack.StartIpamd(ctx, node) })

		By("deleting the Deployment's pods and scaling the StatefulSet from 2 to 1")
		Expect(fixtures.Change(ctx, stack.Client, deploy, func() { deploy.Spec.Replicas = new(int32(0)) })).To(Succeed())
		Expect(fixtures.Change(ctx, stack.Client, sts, func() { sts.Spec.Replicas = new(int32(1)) })).To(Succeed())
		for _, p := range gone {
			Eventually(func() error { return stack.Client.Get(ctx, client.ObjectKeyFromObject(&p), &corev1.Pod{}) }).
				WithContext(ctx).Should(MatchError(ContainSubstring("not found")), "pod %s still terminating", p.Name)
		}
		By("the garbage collector releasing their addresses while ipamd is still down")
		for _, p := range gone {
			Eventually(func() []string { return allocationsOf(ctx, ns+"/"+p.Name) }).WithContext(ctx).Should(BeEmpty(), "pod %s", p.Name)
		}
		Expect(allocationsOf(ctx, ns+"/db-0")).To(HaveLen(4), "the ordinal that stays keeps its addresses")

		By("a new pod on " + node + " failing ADD with a retryable error until ipamd is back")
		Expect(stack.Client.Create(ctx, onNode(newPod(ns, "newcomer", twoNICAnnotations(unnamedTwoNICs)), node))).To(Succeed())
		newcomer := &corev1.Pod{}
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "newcomer"}, newcomer)).To(Succeed())
			g.Expect(strings.Join(podEvents(ctx, newcomer, "FailedCreatePodSandBox"), "\n")).To(ContainSubstring("try again later"))
		}).WithContext(ctx).Should(Succeed())
		Expect(stack.StartIpamd(ctx, node)).To(Succeed())
		runningPod(ctx, ns, "newcomer", "")
		checkInvariants(ctx)
	})
})

// signalIpamd sends sig to a node's ipamd: a stand-in's process, or on a real node
// the process of its ipamd container.
func signalIpamd(node specNode, sig syscall.Signal) error {
	if rn, ok := node.(realNode); ok {
		n, err := rn.Kill("nicpool-ipamd", sig)
		if err == nil && n != 1 {
			err = fmt.Errorf("%v reached %d ipamd processes on %s, want 1", sig, n, node.Name())
		}
		return err
	}
	if sig == syscall.SIGCONT {
		return stack.ResumeIpamd(node.Name())
	}
	return stack.PauseIpamd(node.Name())
}

var _ = Describe("a pod deleted while its node's ipamd is stopped (SIGSTOP), its socket accepting and nothing answering", func() {
	It("is gone within the front's and nicpool-cni's DEL waits, well within the node's 2-minute bound on a DEL; its addresses are released and the node serves again once ipamd goes on", func(ctx SpecContext) {
		ns := newNamespace(ctx, "ipamd-stopped")
		target := specNodes()[2]
		node := target.Name()
		// The pod's eth0 and net1, both through the front, with the default
		// request_timeout (2 min) on eth0 and a longer one on net1: neither DEL may wait
		// for it.
		newNetworkAttachment(ctx, ns, "slow-net", map[string]any{"type": "nicpool", "default_ipv4_ippool": []string{"net1-v4"}, "request_timeout": "4m"})
		Expect(stack.Client.Create(ctx, onNode(newPod(ns, "stuck", map[string]string{annotations.MultusNetworks: "slow-net"}), node))).To(Succeed())
		p := runningPod(ctx, ns, "stuck", "")
		Expect(allocationsOf(ctx, ns+"/stuck")).To(HaveLen(3), "eth0 dual-stack, net1 IPv4")

		By("stopping ipamd on " + node + " with SIGSTOP")
		Expect(signalIpamd(target, syscall.SIGSTOP)).To(Succeed())
		resumed := false
		DeferCleanup(func() {
			if !resumed {
				_ = signalIpamd(target, syscall.SIGCONT)
			}
		})

		By("deleting the pod: each DEL is handed to nicpool-cni after the front's wait and lets the pod go")
		start := time.Now()
		Expect(stack.Client.Delete(ctx, p)).To(Succeed())
		// The node stand-in bounds each DEL through Multus by 2 minutes, as the kubelet
		// does: a DEL that waited for request_timeout would be killed and retried, and
		// the pod would never go.
		Eventually(func() error { return stack.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}) }).
			WithContext(ctx).Should(MatchError(ContainSubstring("not found")), "pod still terminating")
		fmt.Fprintf(GinkgoWriter, "the pod was gone %s after its deletion, ipamd stopped\n", time.Since(start).Round(100*time.Millisecond))

		By("ipamd going on (SIGCONT): the pod's addresses released, and a new pod on " + node + " served")
		// On a real node the kubelet may have restarted the stopped container (its
		// liveness probe): then there is no stopped process left to go on.
		if err := signalIpamd(target, syscall.SIGCONT); err != nil {
			_, onRealNode := target.(realNode)
			Expect(onRealNode).To(BeTrue(), "SIGCONT: %v", err)
		}
		resumed = true
		Eventually(func() []string { return allocationsOf(ctx, ns+"/stuck") }).WithContext(ctx).Should(BeEmpty())
		Expect(stack.Client.Create(ctx, onNode(newPod(ns, "after", map[string]string{annotations.MultusNetworks: "slow-net"}), node))).To(Succeed())
		Expect(nicAddresses(runningPod(ctx, ns, "after", ""))["net1"]).To(HaveLen(1))
		checkInvariants(ctx)
	})
})

// paddedNetwork is a macvlan network through nicpool whose ipam section carries at
// least size bytes of keys no plugin reads, small ones (what a decoder into maps holds
// many times over), before the key that names the pool: a pod that gets an address
// from that pool was served from the configuration read to its end.
func paddedNetwork(name, pool string, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"cniVersion":"1.0.0","name":%q,"type":"macvlan","master":"eth1","mode":"bridge","ipam":{"type":"nicpool"`, name)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `,"k%d":0`, i)
	}
	fmt.Fprintf(&b, `,"default_ipv4_ippool":[%q]}}`, pool)
	return b.String()
}

// ipamdPeak is a node's ipamd, its process id and its peak resident set (VmHWM): a
// stand-in's process, or on a real node the process of its ipamd container.
func ipamdPeak(node specNode) (int, int64) {
	GinkgoHelper()
	var pid int
	if rn, ok := node.(realNode); ok {
		pids, err := rn.Pids("nicpool-ipamd")
		Expect(err).NotTo(HaveOccurred())
		Expect(pids).To(HaveLen(1), "one ipamd process on %s", node.Name())
		pid = pids[0]
	} else {
		var err error
		pid, err = stack.IpamdPid(node.Name())
		Expect(err).NotTo(HaveOccurred())
	}
	m, err := binaries.ReadMemory(pid)
	Expect(err).NotTo(HaveOccurred())
	return pid, m.HWM
}

var _ = Describe("a network configuration of 900 KiB, almost all of it keys no plugin reads", func() {
	It("attaches 16 pods on one node at once: ipamd stays the same process, its peak resident set grows by less than 2 MiB a pod and stays under the DaemonSet's 256Mi limit, and a plain pod on that node still gets its addresses", func(ctx SpecContext) {
		// limit is the DaemonSet's memory limit; perPod what a pod may add to ipamd's peak.
		const pods, limit, perPod = 16, 256 << 20, 2 << 20
		ns := newNamespace(ctx, "bignet")
		n := specNodes()[0]
		config := paddedNetwork("big-net", "net1-v4", 900<<10)
		Expect(len(config)).To(BeNumerically(">", api.MaxConfig), "over what ipamd parses")
		Expect(stack.Client.Create(ctx, &nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big-net"},
			Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
		})).To(Succeed())
		pid, peak := ipamdPeak(n)
		fmt.Fprintf(GinkgoWriter, "ipamd on %s: pid %d, VmHWM %.1f MiB before the pods\n", n.Name(), pid, float64(peak)/(1<<20))

		By(fmt.Sprintf("%d pods on %s attached to it, their sandboxes set up all at once as a kubelet does", pods, n.Name()))
		if standIn, ok := n.(interface{ SetWorkers(int) int }); ok {
			// A stand-in bounds how many pods it sets up at once; a kubelet does not.
			previous := standIn.SetWorkers(pods)
			DeferCleanup(func() { standIn.SetWorkers(previous) })
		}
		batch := map[string]string{"batch": "big"}
		for i := range pods {
			p := onNode(newPod(ns, fmt.Sprintf("big-%d", i), map[string]string{annotations.MultusNetworks: "big-net"}), n.Name())
			maps.Copy(p.Labels, batch)
			Expect(stack.Client.Create(ctx, p)).To(Succeed())
		}
		for _, p := range runningPods(ctx, ns, batch, pods) {
			net1 := nicAddresses(&p)["net1"]
			Expect(net1).To(HaveLen(1), "pod %s", p.Name)
			Expect(net1[0]).To(HavePrefix("10.20.0."), "pod %s: net1 from the pool the configuration names after its padding", p.Name)
		}

		By("ipamd: the same process, its peak resident set under 256 MiB")
		after, afterPeak := ipamdPeak(n)
		fmt.Fprintf(GinkgoWriter, "ipamd on %s: pid %d, VmHWM %.1f MiB after %d ADDs of a %d-byte configuration\n", n.Name(), after, float64(afterPeak)/(1<<20), pods, len(config))
		Expect(after).To(Equal(pid), "ipamd was restarted")
		Expect(afterPeak).To(BeNumerically("<", limit))
		// ipamd never reads a configuration over its bound, so these pods cost it what
		// plain pods do. An ipamd that decoded each one into maps and held it while
		// the call waited grew by 107 MiB here (tried with the bounds raised to 1 MiB).
		Expect(afterPeak-peak).To(BeNumerically("<", pods*perPod), "ipamd's peak grew by %.1f MiB with %d pods", float64(afterPeak-peak)/(1<<20), pods)

		By("a plain pod on " + n.Name() + " getting its addresses")
		Expect(stack.Client.Create(ctx, onNode(newPod(ns, "plain", nil), n.Name()))).To(Succeed())
		plain := runningPod(ctx, ns, "plain", "")
		Expect(nicAddresses(plain)["eth0"]).To(HaveLen(2), "eth0 dual-stack from the default pools")
		Expect(allocationsOf(ctx, ns+"/plain")).To(HaveLen(2))

		By("the pods going when deleted, their addresses released")
		deleteAllPods(ctx, ns)
		for i := range pods {
			Expect(allocationsOf(ctx, fmt.Sprintf("%s/big-%d", ns, i))).To(BeEmpty())
		}
		last, lastPeak := ipamdPeak(n)
		Expect(last).To(Equal(pid), "ipamd was restarted")
		Expect(lastPeak).To(BeNumerically("<", limit))
		checkInvariants(ctx)
	})
})
