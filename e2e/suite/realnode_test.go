package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/cniplugin/install"
	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// Chaos on real nodes: what the stand-ins can only imitate. Each spec ends with the
// invariant check.

// pinnedPods creates count pods named prefix-i on node, each with an eth0 address
// from eth0-v4.
func pinnedPods(ctx SpecContext, ns, prefix, node string, count int) {
	GinkgoHelper()
	for i := range count {
		p := newPod(ns, fmt.Sprintf("%s-%d", prefix, i), map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`})
		p.Labels["batch"] = prefix
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		Expect(stack.Client.Create(ctx, p)).To(Succeed())
	}
}

var _ = describeFor(local.NodeKubelet, "a real node's ipamd container", func() {
	It("killed with SIGKILL in the middle of ADDs: the kubelet restarts it and every pod on its node starts, nothing allocated twice or left behind", func(ctx SpecContext) {
		ns := newNamespace(ctx, "kill9")
		node := stack.Kubelets[0]
		pinnedPods(ctx, ns, "churn", node.Name(), 12)

		By("killing ipamd on " + node.Name() + " as soon as the first pod holds an address")
		Eventually(func() int {
			n := 0
			for i := range 12 {
				n += len(allocationsOf(ctx, fmt.Sprintf("%s/churn-%d", ns, i)))
			}
			return n
		}).WithContext(ctx).WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", 1))
		killed, err := node.Kill("nicpool-ipamd", syscall.SIGKILL)
		Expect(err).NotTo(HaveOccurred())
		Expect(killed).To(Equal(1), "one ipamd process on %s", node.Name())

		By("every pod running with one eth0 address, once the kubelet has restarted ipamd")
		runningPods(ctx, ns, map[string]string{"batch": "churn"}, 12)
		for i := range 12 {
			Expect(allocationsOf(ctx, fmt.Sprintf("%s/churn-%d", ns, i))).To(HaveLen(1))
		}
		ds := &appsv1.DaemonSet{}
		Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: configs.DefaultNamespace, Name: "nicpool-ipamd"}, ds)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(stack.Client.List(ctx, pods, client.InNamespace(configs.DefaultNamespace), client.MatchingFields{"spec.nodeName": node.Name()})).To(Succeed())
			restarts := int32(0)
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					if c.Name == "ipamd" {
						restarts += c.RestartCount
					}
				}
			}
			g.Expect(restarts).To(BeNumerically(">=", 1), "the kubelet restarted the killed container")
		}).WithContext(ctx).Should(Succeed())
		checkInvariants(ctx)
	})

	It("rolled as a DaemonSet while pods are created and deleted: every pod starts, every deleted pod's addresses are released", func(ctx SpecContext) {
		ns := newNamespace(ctx, "roll")
		for _, n := range stack.Kubelets {
			pinnedPods(ctx, ns, "before-"+n.Name(), n.Name(), 3)
		}
		for _, n := range stack.Kubelets {
			runningPods(ctx, ns, map[string]string{"batch": "before-" + n.Name()}, 3)
		}

		By("rolling the ipamd DaemonSet")
		ds := &appsv1.DaemonSet{}
		Eventually(func() error {
			if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: configs.DefaultNamespace, Name: "nicpool-ipamd"}, ds); err != nil {
				return err
			}
			if ds.Spec.Template.Annotations == nil {
				ds.Spec.Template.Annotations = map[string]string{}
			}
			ds.Spec.Template.Annotations["nicpool.io/e2e-roll"] = time.Now().Format(time.RFC3339Nano)
			return stack.Client.Update(ctx, ds)
		}).WithContext(ctx).Should(Succeed())
		generation := ds.Generation

		By("deleting the first pods and creating new ones during the roll")
		Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
		for _, n := range stack.Kubelets {
			pinnedPods(ctx, ns, "during-"+n.Name(), n.Name(), 3)
		}

		By("the roll finishing and every new pod running")
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(ds), ds)).To(Succeed())
			g.Expect(ds.Status.ObservedGeneration).To(BeNumerically(">=", generation))
			g.Expect(ds.Status.UpdatedNumberScheduled).To(Equal(int32(len(stack.Kubelets))))
			g.Expect(ds.Status.NumberReady).To(Equal(int32(len(stack.Kubelets))))
		}).WithContext(ctx).Should(Succeed())
		for _, n := range stack.Kubelets {
			runningPods(ctx, ns, map[string]string{"batch": "during-" + n.Name()}, 3)
			for i := range 3 {
				Eventually(func() []string {
					return allocationsOf(ctx, fmt.Sprintf("%s/before-%s-%d", ns, n.Name(), i))
				}).WithContext(ctx).Should(BeEmpty())
			}
		}
		checkInvariants(ctx)
	})
})

var _ = describeFor(local.NodeKubelet, "a real node that is lost", func() {
	It("gets its StatefulSet pod force-deleted and rescheduled on another node with the same addresses; the node back, the old sandbox's DEL releases nothing of the new pod", func(ctx SpecContext) {
		ns := newNamespace(ctx, "lostnode")
		Expect(stack.Client.Create(ctx, newStatefulSet(ns, "db", 1, twoNICAnnotations(unnamedTwoNICs)))).To(Succeed())
		old := runningPod(ctx, ns, "db-0", "")
		before := nicAddresses(old)
		var lost *kubeletNode
		for _, n := range stack.Kubelets {
			if n.Name() == old.Spec.NodeName {
				lost = n
			}
		}
		Expect(lost).NotTo(BeNil())

		By("losing " + lost.Name() + ": off the network, its kubelet stopped, until the node turns NotReady")
		// Off the network too: a lost node's pods are not on the wire, whereas a node
		// whose kubelet alone stopped still runs db-0 with its addresses (IPv6 duplicate
		// address detection then refuses them to the replacement, DADFAILED).
		Expect(lost.SetLinks(false, local.Uplinks...)).To(Succeed())
		DeferCleanup(func() { _ = lost.SetLinks(true, local.Uplinks...) })
		Expect(realNode{lost}.Partition(ctx)).To(Succeed())
		DeferCleanup(func() { _ = lost.StartDaemon("kubelet") })

		By("force-deleting db-0, as an operator does for a pod on a lost node")
		Expect(stack.Client.Delete(ctx, old, client.GracePeriodSeconds(0))).To(Succeed())
		again := runningPod(ctx, ns, "db-0", old.UID)
		Expect(again.Spec.NodeName).NotTo(Equal(lost.Name()))
		Expect(nicAddresses(again)).To(Equal(before))

		By("the node back on the network, its kubelet started: it tears down the old sandbox")
		Expect(lost.SetLinks(true, local.Uplinks...)).To(Succeed())
		Expect(realNode{lost}.Heal(ctx)).To(Succeed())
		Eventually(func() bool {
			_, ok := lost.Sandbox(ns, "db-0")
			return ok
		}).WithContext(ctx).Should(BeFalse(), "the old sandbox is gone from %s", lost.Name())
		Consistently(func() map[string][]string {
			return nicAddresses(getPod(ctx, ns, "db-0"))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Equal(before))
		Expect(allocationsOf(ctx, ns+"/db-0")).To(HaveLen(4))
		DeferCleanup(func(ctx SpecContext) {
			Expect(stack.Client.Delete(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
		})
		checkInvariants(ctx)
	})
})

var _ = describeFor(local.NodeKubelet, "kube-apiserver", func() {
	It("killed with SIGKILL and restarted during a churn of 300 pods: every pod that should run runs, deleted pods' addresses are released", func(ctx SpecContext) {
		ns := newNamespace(ctx, "apichurn")
		// 300 pods in waves, each created while the one before is being deleted. Not
		// in one burst: every pod start on a real node runs Multus, whose lookup of the
		// pod gives the API server 250 ms (Multus' own limit); a hundred at once on two
		// loaded cores miss it, and the kubelet retries their sandboxes for minutes.
		const waves, perWave = 12, 25
		crashWave := waves / 2
		wave := func(w int) string { return fmt.Sprintf("w%d", w) }
		for w := range waves {
			By(fmt.Sprintf("wave %d: creating %d pods", w, perWave))
			for i := range perWave {
				p := newPod(ns, fmt.Sprintf("%s-%d", wave(w), i), map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`})
				p.Labels["batch"] = wave(w)
				Eventually(func() error { return client.IgnoreAlreadyExists(stack.Client.Create(ctx, p)) }).WithContext(ctx).Should(Succeed())
				if w == crashWave && i == perWave/2 {
					By("killing kube-apiserver with SIGKILL and starting it again")
					Expect(stack.CrashAPIServer(ctx)).To(Succeed())
				}
			}
			// A loaded machine starts pods slowly: minutes, not seconds.
			runningPodsWithin(ctx, ns, map[string]string{"batch": wave(w)}, perWave, 10*time.Minute)
			if w < waves-1 {
				By(fmt.Sprintf("wave %d: deleting them", w))
				Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{"batch": wave(w)})).To(Succeed())
			}
		}
		By("every address of the deleted waves released; the last wave holds one each")
		Eventually(func(g Gomega) {
			records, _, err := ledger.List(ctx, stack.Client)
			g.Expect(err).NotTo(HaveOccurred())
			held := map[string]int{}
			for _, r := range records {
				if pod, ok := strings.CutPrefix(r.Holder.Pod, ns+"/"); ok {
					held[pod]++
				}
			}
			want := map[string]int{}
			for i := range perWave {
				want[fmt.Sprintf("%s-%d", wave(waves-1), i)] = 1
			}
			g.Expect(held).To(Equal(want))
		}).WithContext(ctx).WithTimeout(10 * time.Minute).Should(Succeed())
		checkInvariants(ctx)
	})
})

var _ = describeFor(local.NodeKubelet, "a real node's container runtime", func() {
	It("lists, with ctr run on the node, every nicpool container the API server reports running there, from nicpool's images", func(ctx SpecContext) {
		running := map[string]int{}
		for _, n := range stack.Kubelets {
			pods := &corev1.PodList{}
			Expect(stack.Client.List(ctx, pods, client.InNamespace(configs.DefaultNamespace), client.MatchingFields{"spec.nodeName": n.Name()})).To(Succeed())
			containers, err := n.Exec(ctx, n.Tool("ctr"), "--namespace", "k8s.io", "containers", "list")
			Expect(err).NotTo(HaveOccurred())
			tasks, err := n.Exec(ctx, n.Tool("ctr"), "--namespace", "k8s.io", "tasks", "list")
			Expect(err).NotTo(HaveOccurred())
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					if c.State.Running == nil {
						continue
					}
					id := strings.TrimPrefix(c.ContainerID, "containerd://")
					Expect(lineOf(containers, id)).To(ContainSubstring(strings.TrimPrefix(c.Image, "docker.io/")), "ctr containers list on %s", n.Name())
					Expect(lineOf(tasks, id)).To(ContainSubstring("RUNNING"), "ctr tasks list on %s", n.Name())
					running[c.Name]++
				}
			}
		}
		Expect(running).To(HaveKeyWithValue("ipamd", len(stack.Kubelets)))
		Expect(running).To(HaveKeyWithValue("webhook", 2))
	})
})

var _ = describeFor(local.NodeKubelet, "a real node", func() {
	It("reports the releases its kubelet and containerd are built from, as kubectl get nodes shows them", func(ctx SpecContext) {
		kubelet := pinned("node", "k8s.io/kubernetes")
		containerd := pinned("containerd", "github.com/containerd/containerd/v2")
		for _, n := range stack.Kubelets {
			node := &corev1.Node{}
			Expect(stack.Client.Get(ctx, client.ObjectKey{Name: n.Name()}, node)).To(Succeed())
			Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(kubelet), "node %s", n.Name())
			Expect(node.Status.NodeInfo.ContainerRuntimeVersion).To(Equal("containerd://"+strings.TrimPrefix(containerd, "v")), "node %s", n.Name())
		}
	})
})

// pinned is the version of module that hack/tools/<tools>/go.mod requires.
func pinned(tools, module string) string {
	GinkgoHelper()
	gomod, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "tools", tools, "go.mod"))
	Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + ` (v\S+)`).FindSubmatch(gomod)
	Expect(m).NotTo(BeNil(), "hack/tools/%s/go.mod requires %s", tools, module)
	return string(m[1])
}

// lineOf is the line of a command's output that starts with id.
func lineOf(output, id string) string {
	for line := range strings.Lines(output) {
		if id != "" && strings.HasPrefix(line, id) {
			return line
		}
	}
	return ""
}

var _ = describeFor(local.NodeKubelet, "the CNI plugin's front on a real node", func() {
	It("is installed with nicpool-cni beside it and serves ADD and DEL through ipamd: pods start and go with nicpool-cni gone from the node", func(ctx SpecContext) {
		node := stack.Kubelets[0]
		bin := node.HostPath("/opt/cni/bin")
		for _, name := range []string{install.Front, cniplugin.NameSpiderpool, install.GoPlugin} {
			Expect(filepath.Join(bin, name)).To(BeARegularFile(), "the init container installs %s into the node's /opt/cni/bin", name)
		}

		By("taking nicpool-cni out of " + node.Name() + "'s /opt/cni/bin: only the front and ipamd can serve")
		full, hidden := filepath.Join(bin, install.GoPlugin), filepath.Join(node.Root(), install.GoPlugin+".hidden")
		Expect(os.Rename(full, hidden)).To(Succeed())
		DeferCleanup(func() { Expect(os.Rename(hidden, full)).To(Succeed()) })

		ns := newNamespace(ctx, "front")
		pinnedPods(ctx, ns, "front", node.Name(), 3)
		runningPods(ctx, ns, map[string]string{"batch": "front"}, 3)
		for i := range 3 {
			Expect(allocationsOf(ctx, fmt.Sprintf("%s/front-%d", ns, i))).To(HaveLen(1))
		}

		By("deleting the pods: the kubelet's DELs go through the front too")
		Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
		Eventually(func(g Gomega) int {
			pods := &corev1.PodList{}
			g.Expect(stack.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			return len(pods.Items)
		}).WithContext(ctx).Should(BeZero(), "every pod finished terminating")
		for i := range 3 {
			Eventually(func() []string {
				return allocationsOf(ctx, fmt.Sprintf("%s/front-%d", ns, i))
			}).WithContext(ctx).Should(BeEmpty())
		}
		checkInvariants(ctx)
	})
})
