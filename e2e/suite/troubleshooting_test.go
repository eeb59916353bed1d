package suite

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// situations create what the blocks marked <!-- run: situation NAME --> inspect; the
// spec of each then runs those blocks, in page order, and checks what they print.
var situations = map[string]situation{
	"shop": {create: shopSituation},
	// nicpool installed from its manifests, as pods: only real nodes run them (the
	// stand-ins run ipamd and the webhook as processes).
	"installed": {create: installedSituation, only: local.NodeKubelet},
}

type situation struct {
	create func(ctx SpecContext)
	// only is the kind of node that can create the situation; empty for both.
	only local.NodeKind
}

var _ = Describe("the documentation's situations", func() {
	It("has a spec for every situation the pages name", func() {
		names, err := docs.Situations(testenv.RepoRoot())
		Expect(err).NotTo(HaveOccurred())
		Expect(names).NotTo(BeEmpty(), "no page has a situation block: the troubleshooting page lost its markers")
		for _, n := range names {
			Expect(situations).To(HaveKey(n), "a page names the situation %q, which no spec creates", n)
		}
	})

	for name, s := range situations {
		if s.only != "" && !onNodes(s.only) {
			continue
		}
		It("runs the commands of the situation "+name, NodeTimeout(20*time.Minute), func(ctx SpecContext) {
			cmds, err := docs.SituationCommands(testenv.RepoRoot(), name)
			Expect(err).NotTo(HaveOccurred())
			Expect(cmds).NotTo(BeEmpty(), "no page runs the situation %s", name)
			ensureKubectl(ctx)
			s.create(ctx)
			runPageCommands(ctx, cmds, kubectlNicpool(ctx))
		})
	}
})

// kubectlNicpool builds the kubectl plugin into a directory of its own, which the
// page's commands get on PATH.
func kubectlNicpool(ctx context.Context) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "kubectl-nicpool"), "./cmd/kubectl-nicpool")
	build.Dir = testenv.RepoRoot()
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	return dir
}

// installedSituation is nicpool as `kubectl apply -k` installed it: every replica of
// ipamd's DaemonSet and of the webhook's Deployment ready and up to date (a spec that
// rolled or killed one has let it settle).
func installedSituation(ctx SpecContext) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		ds := &appsv1.DaemonSet{}
		g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: configs.DefaultNamespace, Name: "nicpool-ipamd"}, ds)).To(Succeed())
		g.Expect(ds.Status.DesiredNumberScheduled).To(BeEquivalentTo(len(stack.Kubelets)))
		g.Expect(ds.Status.NumberReady).To(Equal(ds.Status.DesiredNumberScheduled), "ipamd pods ready")
		g.Expect(ds.Status.UpdatedNumberScheduled).To(Equal(ds.Status.DesiredNumberScheduled), "ipamd pods up to date")
		dep := &appsv1.Deployment{}
		g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: configs.DefaultNamespace, Name: "nicpool-webhook"}, dep)).To(Succeed())
		g.Expect(dep.Status.ReadyReplicas).To(BeEquivalentTo(2), "webhook replicas ready")
		g.Expect(dep.Status.UpdatedReplicas).To(BeEquivalentTo(2), "webhook replicas up to date")
	}).WithContext(ctx).Should(Succeed())
}

// shopSituation is docs/troubleshooting.md's cluster: in the namespace shop, a
// StatefulSet of three whose net1 draws from the pool shop-v4 of two addresses, so
// that shop-2 stays in ContainerCreating, and a Deployment whose pods the webhook
// denies (its selection names a pool that does not exist).
func shopSituation(ctx SpecContext) {
	GinkgoHelper()
	const ns = "shop"
	Expect(stack.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	pool := fixtures.Pool(
		"shop-v4",
		"10.40.0.0/24", []string{"10.40.0.10-10.40.0.11"})
	Expect(stack.Client.Create(ctx, pool)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		// The webhook refuses to delete a pool that still holds addresses: the pods go
		// first, then the pool, then the namespace.
		for _, o := range []client.Object{
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"}},
		} {
			Expect(client.IgnoreNotFound(stack.Client.Delete(ctx, o))).To(Succeed())
		}
		Eventually(func() []corev1.Pod { return podsOf(ctx, ns, nil) }).WithContext(ctx).Should(BeEmpty())
		Eventually(func() error { return client.IgnoreNotFound(stack.Client.Delete(ctx, pool)) }).WithContext(ctx).Should(Succeed())
		Expect(client.IgnoreNotFound(stack.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		checkInvariants(ctx)
	})

	sts := newStatefulSet(ns, "shop", 3, twoNICAnnotations(`[{"ipv4":["eth0-v4"],"ipv6":["eth0-v6"]},{"ipv4":["shop-v4"]}]`))
	// One pod after the other, so that the third is the one without an address.
	sts.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	Expect(stack.Client.Create(ctx, sts)).To(Succeed())
	for _, name := range []string{"shop-0", "shop-1"} {
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
			g.Expect(isReady(p)).To(BeTrue(), "pod %s ready", name)
		}).WithContext(ctx).Should(Succeed())
	}

	By("shop-2 waiting for an address of the full pool, with the Events the page shows")
	Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-2"}, p)).To(Succeed())
		g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
		g.Expect(podEvents(ctx, p, "AllocationFailed")).NotTo(BeEmpty())
		g.Expect(podEvents(ctx, p, "FailedCreatePodSandBox")).NotTo(BeEmpty())
	}).WithContext(ctx).Should(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.AllocatedIPCount).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(pool.Status.TotalIPCount).To(HaveValue(BeEquivalentTo(2)))
	}).WithContext(ctx).Should(Succeed(), "kubectl get sp shows the pool full")

	By("a Deployment whose pods the webhook denies")
	t := podTemplate(map[string]string{"app": "checkout"}, map[string]string{
		annotations.MultusNetworks: "default/net1",
		annotations.IPPools:        `[{"ipv4":["eth0-v4"]},{"ipv4":["shop-4"]}]`,
	})
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: t.Labels},
			Template: t,
		},
	}
	Expect(stack.Client.Create(ctx, dep)).To(Succeed())
	Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(stack.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Kind == "ReplicaSet" && e.Reason == "FailedCreate"
		})).To(BeTrue())
	}).WithContext(ctx).Should(Succeed())
	Expect(podsOf(ctx, ns, t.Labels)).To(BeEmpty())
}
