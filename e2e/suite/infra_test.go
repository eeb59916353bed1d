package suite

import (
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/local"
)

var _ = Describe("the local cluster", func() {
	It("runs a Deployment's pods on the node stand-ins, addressed and reachable across nodes", func(ctx SpecContext) {
		ns := newNamespace(ctx, "infra")
		labels := map[string]string{"app": "spread"}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spread"},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(3)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
						// One pod per node, so the TCP check crosses the fabric.
						Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
								LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
								TopologyKey:   "kubernetes.io/hostname",
							}},
						}},
					},
				},
			},
		}
		Expect(stack.Client.Create(ctx, deploy)).To(Succeed())

		By("the Deployment becoming available with one pod per node")
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "spread"}, deploy)).To(Succeed())
			g.Expect(deploy.Status.AvailableReplicas).To(Equal(int32(3)))
		}).WithContext(ctx).Should(Succeed())
		pods := runningPods(ctx, ns, labels, 3)
		nodes := map[string]bool{}
		for _, p := range pods {
			nodes[p.Spec.NodeName] = true
		}
		Expect(nodes).To(HaveLen(3))

		By("each pod's IP being on its eth0, as Multus reported it")
		for i := range pods {
			p := &pods[i]
			Expect(p.Status.PodIP).NotTo(BeEmpty())
			podIP := netip.MustParseAddr(p.Status.PodIP)
			Expect(interfaceAddrs(p)["eth0"]).To(ContainElement(podIP), "pod %s", p.Name)
			status, err := local.NetworkStatus(p)
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(ContainElement(And(
				HaveField("Interface", "eth0"),
				HaveField("IPs", ContainElement(p.Status.PodIP)),
			)), "pod %s network-status", p.Name)
		}

		By("pods on different nodes talking TCP over macvlan")
		server := listenIn(&pods[0], netip.MustParseAddr(pods[0].Status.PodIP))
		for _, from := range pods[1:] {
			answer, err := dialFrom(&from, server)
			Expect(err).NotTo(HaveOccurred(), "from %s on %s to %s on %s", from.Name, from.Spec.NodeName, pods[0].Name, pods[0].Spec.NodeName)
			Expect(answer).To(Equal("echo hello from " + from.Name + "\n"))
		}

		By("scaling to zero removing the pods and their network namespaces")
		Expect(fixtures.Change(ctx, stack.Client, deploy, func() { deploy.Spec.Replicas = new(int32(0)) })).To(Succeed())
		Eventually(func(g Gomega) {
			all := &corev1.PodList{}
			g.Expect(stack.Client.List(ctx, all, client.InNamespace(ns))).To(Succeed())
			g.Expect(all.Items).To(BeEmpty())
		}).WithContext(ctx).Should(Succeed())
		for _, p := range pods {
			_, ok := stack.Sandbox(p.Namespace, p.Name)
			Expect(ok).To(BeFalse(), "pod %s still has a sandbox", p.Name)
		}
		checkInvariants(ctx)
	})

	It("runs a host-network pod without CNI, on the node's address", func(ctx SpecContext) {
		ns := newNamespace(ctx, "hostnet")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: corev1.PodSpec{
				HostNetwork: true,
				Containers:  []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		Expect(stack.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).Should(Succeed())
		Expect(pod.Status.PodIP).To(Equal(pod.Status.HostIP))
		_, sandboxed := stack.Sandbox(ns, "agent")
		Expect(sandboxed).To(BeFalse())
		Expect(stack.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(func() error { return stack.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod) }).WithContext(ctx).Should(MatchError(ContainSubstring("not found")))
		checkInvariants(ctx)
	})
})
