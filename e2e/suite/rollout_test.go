package suite

import (
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("a multi-NIC Deployment", func() {
	It("talks TCP across nodes on its secondary network, and a rollout releases the old pods' addresses", func(ctx SpecContext) {
		ns := newNamespace(ctx, "rollout")
		labels := map[string]string{"app": "api"}
		t := podTemplate(labels, twoNICAnnotations(unnamedTwoNICs))
		t.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
				TopologyKey:   "kubernetes.io/hostname",
			}},
		}}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
			Spec:       appsv1.DeploymentSpec{Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: t},
		}
		Expect(stack.Client.Create(ctx, deploy)).To(Succeed())
		pods := runningPods(ctx, ns, labels, 2)
		Expect(pods[0].Spec.NodeName).NotTo(Equal(pods[1].Spec.NodeName))

		By("connecting from one pod to the other's net1 address")
		var v4 netip.Addr
		for _, a := range nicAddresses(&pods[0])["net1"] {
			if ip := netip.MustParseAddr(a); ip.Is4() {
				v4 = ip
			}
		}
		Expect(v4.IsValid()).To(BeTrue())
		server := listenIn(&pods[0], v4)
		Expect(dialFrom(&pods[1], server)).To(Equal("echo hello from " + pods[1].Name + "\n"))

		By("rolling out a new template")
		Eventually(func() error {
			if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
				return err
			}
			deploy.Spec.Template.Labels["rev"] = "2"
			return stack.Client.Update(ctx, deploy)
		}).WithContext(ctx).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Status.UpdatedReplicas).To(Equal(int32(2)))
			g.Expect(deploy.Status.Replicas).To(Equal(int32(2)))
			g.Expect(deploy.Status.AvailableReplicas).To(Equal(int32(2)))
		}).WithContext(ctx).Should(Succeed())
		for _, old := range pods {
			Eventually(func() []string { return allocationsOf(ctx, ns+"/"+old.Name) }).WithContext(ctx).Should(BeEmpty(), "old pod %s", old.Name)
		}
		checkInvariants(ctx)
	})
})
