package suite

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/local"
)

func newPod(ns, name string, ann map[string]string) *corev1.Pod {
	t := podTemplate(map[string]string{"app": name}, ann)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: t.Labels, Annotations: t.Annotations}, Spec: t.Spec}
}

var _ = Describe("an exhausted pool", func() {
	It("keeps only the pod whose interface it cannot serve Pending, retried without consuming addresses (spiderpool bug 2), until an address is freed", func(ctx SpecContext) {
		ns := newNamespace(ctx, "exhaust")
		tiny := fixtures.Pool(
			ns+"-tiny",
			"10.30.0.0/24", []string{"10.30.0.10"})
		Expect(stack.Client.Create(ctx, tiny)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			// The webhook refuses to delete a pool that still holds addresses: the
			// pods go first.
			Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
			Eventually(func() error { return client.IgnoreNotFound(stack.Client.Delete(ctx, tiny)) }).WithContext(ctx).Should(Succeed())
		})
		ann := twoNICAnnotations(fmt.Sprintf(`[{"ipv4":["eth0-v4"]},{"ipv4":[%q]}]`, tiny.Name))

		first := newPod(ns, "first", ann)
		Expect(stack.Client.Create(ctx, first)).To(Succeed())
		first = runningPod(ctx, ns, "first", "")
		Expect(nicAddresses(first)["net1"]).To(Equal([]string{"10.30.0.10"}))

		By("a second pod staying Pending with the kubelet's event naming the pool")
		second := newPod(ns, "second", ann)
		Expect(stack.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
			g.Expect(failedSandboxAttempts(ctx, second)).To(BeNumerically(">=", 3))
		}).WithContext(ctx).Should(Succeed())
		Expect(second.Status.Phase).To(Equal(corev1.PodPending))
		Expect(strings.Join(podEvents(ctx, second, "FailedCreatePodSandBox"), "\n")).To(ContainSubstring(tiny.Name))

		By("the retries holding at most one eth0 address and nothing in the exhausted pool")
		var eth0 []string
		for _, a := range allocationsOf(ctx, ns+"/second") {
			Expect(a).NotTo(HavePrefix(tiny.Name + " "))
			if strings.HasPrefix(a, "eth0-v4 ") {
				eth0 = append(eth0, a)
			}
		}
		Expect(len(eth0)).To(BeNumerically("<=", 1))

		By("deleting the first pod, which frees the address")
		Expect(stack.Client.Delete(ctx, first)).To(Succeed())
		second = runningPod(ctx, ns, "second", "")
		Expect(nicAddresses(second)["net1"]).To(Equal([]string{"10.30.0.10"}))
		checkInvariants(ctx)
	})
})

// failedSandboxAttempts counts the kubelet's failed sandbox creations for a pod.
func failedSandboxAttempts(ctx SpecContext, p *corev1.Pod) int32 {
	events := &corev1.EventList{}
	Expect(stack.Client.List(ctx, events, client.InNamespace(p.Namespace))).To(Succeed())
	var n int32
	for _, e := range events.Items {
		if e.InvolvedObject.UID == p.UID && e.Reason == "FailedCreatePodSandBox" {
			n += max(e.Count, 1)
		}
	}
	return n
}

var _ = Describe("bad pool annotations", func() {
	It("are rejected when the pod is created, with the webhook's message", func(ctx SpecContext) {
		ns := newNamespace(ctx, "reject")
		err := stack.Client.Create(ctx, newPod(ns, "unknown-pool", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["no-such-pool"]}]`}))
		Expect(err).To(MatchError(ContainSubstring("no-such-pool")))
		err = stack.Client.Create(ctx, newPod(ns, "malformed", map[string]string{annotations.IPPools: `[{"ipv4":`}))
		Expect(err).To(MatchError(ContainSubstring(annotations.IPPools)))
		err = stack.Client.Create(ctx, newPod(ns, "too-many", map[string]string{annotations.IPPools: unnamedTwoNICs}))
		Expect(err).To(MatchError(ContainSubstring(annotations.IPPools)), "two entries for a pod with only eth0")
		checkInvariants(ctx)
	})
})

var _ = Describe("pods that go away", func() {
	It("releases the addresses of a completed Job's pods", func(ctx SpecContext) {
		ns := newNamespace(ctx, "job")
		t := podTemplate(map[string]string{"app": "batch"}, map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"],"ipv6":["eth0-v6"]}`})
		t.Spec.RestartPolicy = corev1.RestartPolicyNever
		// pause -v prints its version and exits 0: a container that completes.
		t.Spec.Containers[0].Args = []string{"-v"}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"},
			Spec:       batchv1.JobSpec{Completions: new(int32(3)), Parallelism: new(int32(3)), Template: t},
		}
		Expect(stack.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Succeeded).To(Equal(int32(3)))
		}).WithContext(ctx).Should(Succeed())
		pods := &corev1.PodList{}
		Expect(stack.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range pods.Items {
			Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
			Eventually(func() []string { return allocationsOf(ctx, ns+"/"+p.Name) }).WithContext(ctx).Should(BeEmpty(), "pod %s", p.Name)
		}
		checkInvariants(ctx)
	})

	It("releases every address and endpoint of a deleted namespace", func(ctx SpecContext) {
		ns := newNamespace(ctx, "gone")
		Expect(stack.Client.Create(ctx, newStatefulSet(ns, "db", 2, twoNICAnnotations(unnamedTwoNICs)))).To(Succeed())
		runningPods(ctx, ns, map[string]string{"app": "db"}, 2)
		Expect(stack.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(allocationsOf(ctx, ns+"/db-0")).To(BeEmpty())
			g.Expect(allocationsOf(ctx, ns+"/db-1")).To(BeEmpty())
			eps := &v2beta1.SpiderEndpointList{}
			g.Expect(stack.Client.List(ctx, eps, client.InNamespace(ns))).To(Succeed())
			g.Expect(eps.Items).To(BeEmpty())
		}).WithContext(ctx).Should(Succeed())
		checkInvariants(ctx)
	})
})

// The stand-in version: ipamd is a process of the test; the node stand-in forgets a
// force-deleted pod's sandbox without CNI DEL, as a node that lost it would.
var _ = describeFor(local.NodeStandIn, "a node's ipamd", func() {
	It("killed during churn and restarted: pods on its node start, and the garbage collector releases a pod force-deleted meanwhile", func(ctx SpecContext) {
		ns := newNamespace(ctx, "crash")
		node := stack.Nodes[0].Name()
		pin := func(name string) *corev1.Pod {
			p := newPod(ns, name, map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`})
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
			return p
		}
		Expect(stack.Client.Create(ctx, pin("victim"))).To(Succeed())
		victim := runningPod(ctx, ns, "victim", "")
		Expect(allocationsOf(ctx, ns+"/victim")).To(HaveLen(1))

		By("killing ipamd on " + node)
		Expect(stack.StopIpamd(node, 0)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = stack.StartIpamd(ctx, node) })

		By("force-deleting a pod whose node then loses its sandbox, and creating another pod on that node, while ipamd is down")
		Expect(stack.Client.Delete(ctx, victim, client.GracePeriodSeconds(0))).To(Succeed())
		// No CNI DEL will ever come for the victim: releasing it is the garbage
		// collector's job.
		Expect(stack.Nodes[0].Forget(ns, "victim")).To(BeTrue())
		Expect(stack.Client.Create(ctx, pin("newcomer"))).To(Succeed())
		newcomer := &corev1.Pod{}
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "newcomer"}, newcomer)).To(Succeed())
			g.Expect(failedSandboxAttempts(ctx, newcomer)).To(BeNumerically(">=", 1))
		}).WithContext(ctx).Should(Succeed())

		By("restarting ipamd")
		Expect(stack.StartIpamd(ctx, node)).To(Succeed())
		runningPod(ctx, ns, "newcomer", "")
		Eventually(func() []string { return allocationsOf(ctx, ns+"/victim") }).WithContext(ctx).WithTimeout(3 * time.Minute).Should(BeEmpty())
		checkInvariants(ctx)
	})
})
