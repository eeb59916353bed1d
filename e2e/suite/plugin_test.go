package suite

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
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
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
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
		Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
		Eventually(func(g Gomega) {
			all := &corev1.PodList{}
			g.Expect(stack.Client.List(ctx, all, client.InNamespace(ns))).To(Succeed())
			g.Expect(all.Items).To(BeEmpty())
		}).WithContext(ctx).Should(Succeed())

		By("nothing outside created, written or connected to")
		after, err := testenv.Snapshot(outside)
		Expect(err).NotTo(HaveOccurred())
		Expect(maps.Equal(before, after)).To(BeTrue(), "before %v\nafter  %v", before, after)
		Expect(testenv.ConnectedTo(listener)).To(BeFalse())
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
		Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
		deploy.Spec.Replicas = new(int32(0))
		Expect(stack.Client.Update(ctx, deploy)).To(Succeed())
		Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
		sts.Spec.Replicas = new(int32(1))
		Expect(stack.Client.Update(ctx, sts)).To(Succeed())
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

// Stand-ins only for now, as the spec above: it stops a stand-in node's ipamd process.
var _ = describeFor(local.NodeStandIn, "a pod deleted while its node's ipamd is stopped (SIGSTOP), its socket accepting and nothing answering", func() {
	It("is gone within the front's and nicpool-cni's DEL waits, well within the node's 2-minute bound on a DEL; its addresses are released and the node serves again once ipamd goes on", func(ctx SpecContext) {
		ns := newNamespace(ctx, "ipamd-stopped")
		node := stack.Nodes[2].Name()
		// The pod's eth0 and net1, both through the front, with the default
		// request_timeout (2 min) on eth0 and a longer one on net1: neither DEL may wait
		// for it.
		newNetworkAttachment(ctx, ns, "slow-net", map[string]any{"type": "nicpool", "default_ipv4_ippool": []string{"net1-v4"}, "request_timeout": "4m"})
		Expect(stack.Client.Create(ctx, onNode(newPod(ns, "stuck", map[string]string{annotations.MultusNetworks: "slow-net"}), node))).To(Succeed())
		p := runningPod(ctx, ns, "stuck", "")
		Expect(allocationsOf(ctx, ns+"/stuck")).To(HaveLen(3), "eth0 dual-stack, net1 IPv4")

		By("stopping ipamd on " + node + " with SIGSTOP")
		Expect(stack.PauseIpamd(node)).To(Succeed())
		resumed := false
		DeferCleanup(func() {
			if !resumed {
				_ = stack.ResumeIpamd(node)
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
		Expect(stack.ResumeIpamd(node)).To(Succeed())
		resumed = true
		Eventually(func() []string { return allocationsOf(ctx, ns+"/stuck") }).WithContext(ctx).Should(BeEmpty())
		Expect(stack.Client.Create(ctx, onNode(newPod(ns, "after", map[string]string{annotations.MultusNetworks: "slow-net"}), node))).To(Succeed())
		Expect(nicAddresses(runningPod(ctx, ns, "after", ""))["net1"]).To(HaveLen(1))
		checkInvariants(ctx)
	})
})
