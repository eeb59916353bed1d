package suite

import (
	"context"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// newSpecPool creates a pool for one spec and deletes it when the spec ends, after the
// namespace's StatefulSets and pods (the webhook refuses to delete a pool that still
// holds addresses).
func newSpecPool(ctx context.Context, ns, subnet string, ips ...string) *v2beta1.SpiderIPPool {
	GinkgoHelper()
	pool := fixtures.Pool(ns+"-pool", subnet, ips)
	Expect(stack.Client.Create(ctx, pool)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(stack.Client.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(ns))).To(Succeed())
		Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
		Eventually(func() error { return client.IgnoreNotFound(stack.Client.Delete(ctx, pool)) }).WithContext(ctx).Should(Succeed())
	})
	return pool
}

var _ = Describe("a StatefulSet pod on its namespace's default pool", func() {
	It("keeps its address when recreated, even after a lower address was freed (I5, issue 10 finding 4)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "nsdefault")
		pool := newSpecPool(ctx, ns, "10.31.0.0/24", "10.31.0.10-10.31.0.20")
		namespace := &corev1.Namespace{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		namespace.Annotations = map[string]string{annotations.NamespaceDefaultIPv4Pool: `["` + pool.Name + `"]`}
		Expect(stack.Client.Update(ctx, namespace)).To(Succeed())

		By("a pod taking an address, then the StatefulSet's pod taking the next one")
		filler := newPod(ns, "filler", nil)
		Expect(stack.Client.Create(ctx, filler)).To(Succeed())
		filler = runningPod(ctx, ns, "filler", "")
		Expect(stack.Client.Create(ctx, newStatefulSet(ns, "db", 1, nil))).To(Succeed())
		old := runningPod(ctx, ns, "db-0", "")
		before := nicAddresses(old)
		Expect(before["eth0"]).To(HaveLen(1))
		Expect(allocationsOf(ctx, ns+"/db-0")).To(ConsistOf(pool.Name + " " + before["eth0"][0] + " eth0"))

		By("freeing the other pod's address")
		Expect(stack.Client.Delete(ctx, filler)).To(Succeed())
		Eventually(func() []string { return allocationsOf(ctx, ns+"/filler") }).WithContext(ctx).Should(BeEmpty())

		By("deleting db-0: its replacement keeps the address")
		Expect(stack.Client.Delete(ctx, old)).To(Succeed())
		again := runningPod(ctx, ns, "db-0", old.UID)
		Expect(nicAddresses(again)).To(Equal(before))
		checkInvariants(ctx)
	})
})

var _ = Describe("an ippools annotation that leaves out one of the pod's interfaces", func() {
	It("fails that interface's ADD with an event naming the annotation and the interface, instead of serving it from default pools (spiderpool's behaviour)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "partial")
		p := newPod(ns, "partial", map[string]string{
			annotations.MultusNetworks: "default/net1",
			annotations.IPPools:        `[{"interface":"eth0","ipv4":["eth0-v4"]}]`,
		})
		Expect(stack.Client.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(strings.Join(podEvents(ctx, p, "InvalidPoolSelection"), "\n")).To(
				ContainSubstring("annotation " + annotations.IPPools + " names no pools for interface net1"))
			g.Expect(failedSandboxAttempts(ctx, p)).To(BeNumerically(">=", 1))
		}).WithContext(ctx).Should(Succeed())
		Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		for _, a := range allocationsOf(ctx, ns+"/partial") {
			Expect(a).NotTo(HaveSuffix(" net1"), "net1 was given an address")
		}
		Expect(stack.Client.Delete(ctx, p)).To(Succeed())
		Eventually(func() []string { return allocationsOf(ctx, ns+"/partial") }).WithContext(ctx).Should(BeEmpty())
		checkInvariants(ctx)
	})
})

var _ = Describe("a terminating pod on a node that stopped reporting", func() {
	It("keeps its address past its grace until its pod object is gone (issue 10 finding 7)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "partition")
		nodes := specNodes()
		node := nodes[len(nodes)-1]
		p := newPod(ns, "stray", map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`})
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node.Name()}
		Expect(stack.Client.Create(ctx, p)).To(Succeed())
		p = runningPod(ctx, ns, "stray", "")
		held := allocationsOf(ctx, ns+"/stray")
		Expect(held).To(HaveLen(1))

		By("cutting " + node.Name() + " off: it turns NotReady and stops acting on its pods")
		Expect(node.Partition(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(node.Heal(ctx)).To(Succeed()) })

		By("deleting the pod, which stays terminating past its grace period")
		Expect(stack.Client.Delete(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.DeletionTimestamp).NotTo(BeNil())
			g.Expect(time.Now().After(p.DeletionTimestamp.Time)).To(BeTrue())
		}).WithContext(ctx).Should(Succeed())

		By("a garbage collection pass with no extra grace, as nicpool-webhook, keeping the address")
		// The pass writes as the garbage collector does (the policies let only nicpool's
		// service accounts write pool status); a fresh collector releases no orphan on
		// its first pass (MinAge), so only terminating pods are judged.
		collector := gc.NewCollector(asWebhook(), stack.Client, gc.Options{TerminatingGrace: ptr.To(time.Duration(0))})
		res, err := collector.Pass(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range res.Released {
			Expect(r.Holder.Pod).NotTo(Equal(ns+"/stray"), "released %s of the partitioned node's pod", r.Address)
		}
		Expect(allocationsOf(ctx, ns+"/stray")).To(Equal(held))

		By("the pod object force-deleted: the garbage collector releases its address")
		Expect(stack.Client.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() []string { return allocationsOf(ctx, ns+"/stray") }).WithContext(ctx).Should(BeEmpty())
		checkInvariants(ctx)
	})
})

// asWebhook is a client that authenticates as nicpool-webhook's service account.
func asWebhook() client.Client {
	GinkgoHelper()
	ns := configs.DefaultNamespace
	kc, err := stack.UserKubeconfig("spec-gc", "system:serviceaccount:"+ns+":"+configs.WebhookServiceAccount,
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: stack.Client.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}
