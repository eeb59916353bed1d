package suite

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/kubelet"
	"github.com/nicpool/nicpool/e2e/local"
)

// describeFor registers a container of specs (Describe's arguments) for one kind of
// node only.
func describeFor(kind local.NodeKind, text string, args ...any) bool {
	if !onNodes(kind) {
		return false
	}
	return Describe(text, append([]any{Label(string(kind))}, args...)...)
}

// onNodes says whether the suite runs on nodes of that kind.
func onNodes(kind local.NodeKind) bool {
	return nodeKind == kind || (kind == local.NodeStandIn && nodeKind == "")
}

// newNamespace creates a namespace for one spec and deletes it when the spec ends.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)}}
	Expect(stack.Client.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(stack.Client.Delete(ctx, ns))).To(Succeed())
	})
	return ns.Name
}

// deleteAllPods deletes every pod of namespace and waits until none is left: each
// pod's CNI DEL has run and the kubelet (or stand-in) let it go.
func deleteAllPods(ctx context.Context, namespace string) {
	GinkgoHelper()
	Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(namespace))).To(Succeed())
	Eventually(func(g Gomega) {
		all := &corev1.PodList{}
		g.Expect(stack.Client.List(ctx, all, client.InNamespace(namespace))).To(Succeed())
		g.Expect(all.Items).To(BeEmpty())
	}).WithContext(ctx).Should(Succeed())
}

// podsOf lists the live pods of namespace matching labels.
func podsOf(ctx context.Context, namespace string, labels map[string]string) []corev1.Pod {
	GinkgoHelper()
	list := &corev1.PodList{}
	Expect(stack.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(labels))).To(Succeed())
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// runningPods waits until exactly count pods matching labels are Running and Ready.
func runningPods(ctx context.Context, namespace string, labels map[string]string, count int) []corev1.Pod {
	GinkgoHelper()
	return runningPodsWithin(ctx, namespace, labels, count, 0)
}

// runningPodsWithin is runningPods waiting up to timeout (0: the suite's default).
func runningPodsWithin(ctx context.Context, namespace string, labels map[string]string, count int, timeout time.Duration) []corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	poll := Eventually(func(g Gomega) {
		pods = podsOf(ctx, namespace, labels)
		g.Expect(pods).To(HaveLen(count))
		for _, p := range pods {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			g.Expect(isReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
		}
	}).WithContext(ctx)
	if timeout > 0 {
		poll = poll.WithTimeout(timeout)
	}
	poll.Should(Succeed())
	return pods
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// interfaceAddrs reads the global addresses of every interface inside a pod's network
// namespace: what the pod's processes would see.
func interfaceAddrs(pod *corev1.Pod) map[string][]netip.Addr {
	GinkgoHelper()
	out, err := stack.PodAddrs(pod.Namespace, pod.Name)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// listenIn opens a TCP echo server inside a pod's namespace on addr and returns its
// address; it stops when the spec ends.
func listenIn(pod *corev1.Pod, addr netip.Addr) netip.AddrPort {
	GinkgoHelper()
	path, ok := stack.Sandbox(pod.Namespace, pod.Name)
	Expect(ok).To(BeTrue())
	var l net.Listener
	Expect(ns.WithNetNSPath(path, func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	})).To(Succeed())
	DeferCleanup(l.Close)
	go func() {
		defer GinkgoRecover()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = fmt.Fprintf(c, "echo %s", line)
				}
			}()
		}
	}()
	return netip.MustParseAddrPort(l.Addr().String())
}

// dialFrom connects from inside a pod's namespace to target, sends a line and returns
// the answer.
func dialFrom(pod *corev1.Pod, target netip.AddrPort) (string, error) {
	path, ok := stack.Sandbox(pod.Namespace, pod.Name)
	if !ok {
		return "", fmt.Errorf("pod %s has no sandbox", pod.Name)
	}
	var answer string
	err := ns.WithNetNSPath(path, func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", target.String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(c, "hello from %s\n", pod.Name); err != nil {
			return err
		}
		answer, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return answer, err
}

// kubeletNode is a real node of the stack (NICPOOL_E2E_NODE=kubelet).
type kubeletNode = kubelet.Node

// specNode is a node as specs use it, whichever kind plays it.
type specNode interface {
	Name() string
	// RunDir and LogDir are the node's /run/nicpool and /var/log/nicpool, as this
	// process reaches them.
	RunDir() string
	LogDir() string
	// Partition cuts the node off: it turns NotReady and stops acting on its pods
	// (its pods' containers keep running). Heal undoes it.
	Partition(ctx context.Context) error
	Heal(ctx context.Context) error
}

// specNodes are the stack's nodes.
func specNodes() []specNode {
	var out []specNode
	for _, n := range stack.Nodes {
		out = append(out, n)
	}
	for _, n := range stack.Kubelets {
		out = append(out, realNode{n})
	}
	return out
}

// realNode is a real node as a specNode: partitioned by stopping its kubelet.
type realNode struct{ *kubeletNode }

func (n realNode) RunDir() string { return n.HostPath(cniplugin.RunDir) }
func (n realNode) LogDir() string { return n.HostPath(cniplugin.LogDir) }

func (n realNode) Partition(ctx context.Context) error {
	if err := n.StopDaemon("kubelet", 10*time.Second); err != nil {
		return err
	}
	return n.waitReady(ctx, false)
}

func (n realNode) Heal(ctx context.Context) error {
	if err := n.StartDaemon("kubelet"); err != nil {
		return err
	}
	return n.waitReady(ctx, true)
}

// waitReady waits until the Node object's Ready condition is (or is no longer) True.
func (n realNode) waitReady(ctx context.Context, ready bool) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		node := &corev1.Node{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: n.Name()}, node); err != nil {
			return false, nil //nolint:nilerr // polled again until the timeout
		}
		return nodeReady(node) == ready, nil
	})
}

// nodeReady is the Node's Ready condition.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
