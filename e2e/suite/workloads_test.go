package suite

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// unnamedTwoNICs selects eth0's and net1's dual-stack pools without naming the
// interfaces, the spiderpool usage behind the reported bugs.
const unnamedTwoNICs = `[{"ipv4":["eth0-v4"],"ipv6":["eth0-v6"]},{"ipv4":["net1-v4"],"ipv6":["net1-v6"]}]`

// twoNICAnnotations attach the sample secondary network and select pools per NIC.
func twoNICAnnotations(ippools string) map[string]string {
	return map[string]string{
		annotations.MultusNetworks: "default/net1",
		annotations.IPPools:        ippools,
	}
}

func podTemplate(labels, ann map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: new(int64(1)),
		},
	}
}

func newStatefulSet(ns, name string, replicas int32, ann map[string]string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template:            podTemplate(labels, ann),
		},
	}
}

// nicAddresses is what Multus reported per interface: "eth0" → sorted addresses.
func nicAddresses(p *corev1.Pod) map[string][]string {
	GinkgoHelper()
	st, err := local.NetworkStatus(p)
	Expect(err).NotTo(HaveOccurred())
	out := map[string][]string{}
	for _, s := range st {
		ips := append([]string(nil), s.IPs...)
		sort.Strings(ips)
		out[s.Interface] = ips
	}
	return out
}

func getPod(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{}
	Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

// runningPod waits until the pod of that name is Running with a UID other than
// notUID, and returns it.
func runningPod(ctx context.Context, ns, name string, notUID types.UID) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{}
	Eventually(func(g Gomega) {
		g.Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
		g.Expect(p.UID).NotTo(Equal(notUID))
		g.Expect(p.DeletionTimestamp).To(BeNil())
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
	}).WithContext(ctx).Should(Succeed())
	return p
}

// allocationsOf lists "pool address interface" of every allocation held by pod name
// (ns/name), whatever its UID.
func allocationsOf(ctx context.Context, pod string) []string {
	GinkgoHelper()
	records, _, err := ledger.List(ctx, stack.Client)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, r := range records {
		if r.Holder.Pod == pod {
			out = append(out, fmt.Sprintf("%s %s %s", r.Pool, r.Addr, r.Holder.Interface))
		}
	}
	sort.Strings(out)
	return out
}

// podEvents returns the messages of the pod's events with reason.
func podEvents(ctx context.Context, p *corev1.Pod, reason string) []string {
	GinkgoHelper()
	events := &corev1.EventList{}
	Expect(stack.Client.List(ctx, events, client.InNamespace(p.Namespace))).To(Succeed())
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == p.Name && e.InvolvedObject.UID == p.UID && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

var _ = Describe("StatefulSet with unnamed multi-NIC pool entries", func() {
	It("names and addresses every interface, and a deleted pod comes back with the same addresses (spiderpool bug 1)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "sts")
		Expect(stack.Client.Create(ctx, newStatefulSet(ns, "db", 2, twoNICAnnotations(unnamedTwoNICs)))).To(Succeed())
		pods := runningPods(ctx, ns, map[string]string{"app": "db"}, 2)

		By("the webhook naming every entry's interface")
		for i := range pods {
			p := &pods[i]
			Expect(p.Annotations[annotations.IPPools]).To(And(
				ContainSubstring(`"interface":"eth0"`), ContainSubstring(`"interface":"net1"`)))
			addrs := nicAddresses(p)
			Expect(addrs).To(HaveKey("eth0"))
			Expect(addrs).To(HaveKey("net1"))
			Expect(addrs["eth0"]).To(HaveLen(2), "IPv4 and IPv6 on eth0 of %s", p.Name)
			Expect(addrs["net1"]).To(HaveLen(2), "IPv4 and IPv6 on net1 of %s", p.Name)
			inside := interfaceAddrs(p)
			Expect(inside).To(HaveKey("net1"), "net1 exists inside %s", p.Name)
		}

		By("the SpiderEndpoint recording both interfaces by name")
		ep := &v2beta1.SpiderEndpoint{}
		Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-0"}, ep)).To(Succeed())
		var nics []string
		for _, r := range ep.Status.Current.IPs {
			nics = append(nics, r.Interface)
		}
		Expect(nics).To(ConsistOf("eth0", "net1"))

		By("deleting db-0 and waiting for its replacement")
		old := getPod(ctx, ns, "db-0")
		before := nicAddresses(old)
		Expect(stack.Client.Delete(ctx, old)).To(Succeed())
		again := runningPod(ctx, ns, "db-0", old.UID)
		Expect(nicAddresses(again)).To(Equal(before))
		Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-0"}, ep)).To(Succeed())
		Expect(ep.Status.Current.UID).To(Equal(string(again.UID)))
		checkInvariants(ctx)
	})

	It("releases a scaled-away ordinal and gives it addresses again when it returns", func(ctx SpecContext) {
		ns := newNamespace(ctx, "scale")
		sts := newStatefulSet(ns, "web", 2, twoNICAnnotations(unnamedTwoNICs))
		Expect(stack.Client.Create(ctx, sts)).To(Succeed())
		runningPods(ctx, ns, map[string]string{"app": "web"}, 2)
		Expect(allocationsOf(ctx, ns+"/web-1")).To(HaveLen(4))

		By("scaling down to one replica")
		scale(ctx, sts, 1)
		Eventually(func() []string { return allocationsOf(ctx, ns+"/web-1") }).WithContext(ctx).Should(BeEmpty())
		Eventually(func() error {
			return stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-1"}, &v2beta1.SpiderEndpoint{})
		}).WithContext(ctx).Should(MatchError(ContainSubstring("not found")))

		By("scaling up again")
		scale(ctx, sts, 2)
		back := runningPod(ctx, ns, "web-1", "")
		Expect(nicAddresses(back)).To(HaveKey("net1"))
		Expect(allocationsOf(ctx, ns+"/web-1")).To(HaveLen(4))
		checkInvariants(ctx)
	})

	It("starts the pods of a StatefulSet deleted and created again at once (spiderpool bug 3)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "recreate")
		Expect(stack.Client.Create(ctx, newStatefulSet(ns, "app", 2, twoNICAnnotations(unnamedTwoNICs)))).To(Succeed())
		first := runningPods(ctx, ns, map[string]string{"app": "app"}, 2)

		By("deleting the StatefulSet and its pods, then creating it again without waiting")
		Expect(stack.Client.Delete(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}},
			client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(func(g Gomega) {
			err := stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, &appsv1.StatefulSet{})
			g.Expect(err).To(MatchError(ContainSubstring("not found")))
		}).WithContext(ctx).Should(Succeed())
		Expect(stack.Client.Create(ctx, newStatefulSet(ns, "app", 2, twoNICAnnotations(unnamedTwoNICs)))).To(Succeed())

		By("every new pod running, none failing on a stale endpoint")
		for _, old := range first {
			p := runningPod(ctx, ns, old.Name, old.UID)
			Expect(strings.Join(podEvents(ctx, p, "FailedCreatePodSandBox"), "\n")).NotTo(ContainSubstring("recondition"))
			Expect(nicAddresses(p)).To(HaveKey("net1"))
		}

		By("deleting a pod and its SpiderEndpoint at the same moment")
		old := getPod(ctx, ns, "app-0")
		Expect(stack.Client.Delete(ctx, old)).To(Succeed())
		Expect(client.IgnoreNotFound(stack.Client.Delete(ctx, &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-0"}}))).To(Succeed())
		p := runningPod(ctx, ns, "app-0", old.UID)
		Expect(strings.Join(podEvents(ctx, p, "FailedCreatePodSandBox"), "\n")).NotTo(ContainSubstring("recondition"))
		Expect(nicAddresses(p)).To(HaveKey("net1"))
		checkInvariants(ctx)
	})
})

func scale(ctx context.Context, sts *appsv1.StatefulSet, replicas int32) {
	GinkgoHelper()
	Eventually(func() error {
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
			return err
		}
		sts.Spec.Replicas = &replicas
		return stack.Client.Update(ctx, sts)
	}).WithContext(ctx).Should(Succeed())
}
