package suite

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// Stand-ins only for now: Stack.StopWebhook stops the local webhook process; on real
// nodes the Deployment would be scaled to zero and back.
var _ = describeFor(local.NodeStandIn, "the node path without the webhook", Serial, func() {
	It("addresses unannotated pods and releases a multi-NIC pod while the webhook is down; StatefulSet and annotated pods wait until it is back", func(ctx SpecContext) {
		ns := newNamespace(ctx, "nowebhook")
		Expect(stack.Client.Create(ctx, newPod(ns, "multi", twoNICAnnotations(unnamedTwoNICs)))).To(Succeed())
		multi := runningPod(ctx, ns, "multi", "")
		Expect(nicAddresses(multi)).To(HaveKey("net1"))
		Expect(allocationsOf(ctx, ns+"/multi")).To(HaveLen(4))

		By("stopping every nicpool-webhook")
		Expect(stack.StopWebhook(10 * time.Second)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			if stack.Webhook == nil {
				Expect(stack.StartWebhook(ctx)).To(Succeed())
			}
		})
		Eventually(func() error {
			return stack.Client.Create(ctx, newPod(ns, "probe", twoNICAnnotations(unnamedTwoNICs)), client.DryRunAll)
		}).WithContext(ctx).Should(MatchError(ContainSubstring("failed calling webhook")))

		By("an unannotated pod gets its addresses from the default pools")
		Expect(stack.Client.Create(ctx, newPod(ns, "plain", nil))).To(Succeed())
		plain := runningPod(ctx, ns, "plain", "")
		Expect(nicAddresses(plain)["eth0"]).To(HaveLen(2))
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, &v2beta1.SpiderEndpoint{})).To(Succeed())

		By("the multi-NIC pod's DEL releases both interfaces")
		Expect(stack.Client.Delete(ctx, multi)).To(Succeed())
		Eventually(func() []string { return allocationsOf(ctx, ns+"/multi") }).WithContext(ctx).Should(BeEmpty())
		Eventually(func() error {
			return stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "multi"}, &v2beta1.SpiderEndpoint{})
		}).WithContext(ctx).Should(MatchError(ContainSubstring("not found")))

		By("an annotated pod and a StatefulSet's pod are refused, never admitted unresolved or unstamped")
		Expect(stack.Client.Create(ctx, newPod(ns, "annotated", twoNICAnnotations(unnamedTwoNICs)))).To(MatchError(ContainSubstring("failed calling webhook")))
		sts := newStatefulSet(ns, "db", 1, nil)
		Expect(stack.Client.Create(ctx, sts)).To(Succeed())
		Eventually(func() []string {
			return eventsOf(ctx, ns, "StatefulSet", "db", "FailedCreate")
		}).WithContext(ctx).Should(ContainElement(ContainSubstring("failed calling webhook")))
		Expect(podsOf(ctx, ns, map[string]string{"app": "db"})).To(BeEmpty())

		By("starting the webhook again: the StatefulSet controller's retry creates the pod, stamped")
		Expect(stack.StartWebhook(ctx)).To(Succeed())
		db := runningPod(ctx, ns, "db-0", "")
		Expect(db.Annotations).To(HaveKeyWithValue(annotations.EndpointUID, annotations.NoEndpoint))
		Expect(stack.Client.Create(ctx, newPod(ns, "annotated", twoNICAnnotations(unnamedTwoNICs)))).To(Succeed())
		runningPod(ctx, ns, "annotated", "")
		checkInvariants(ctx)
	})
})

var _ = Describe("nicpool's admission policies", func() {
	It("type-check against the API server's schemas without a warning", func(ctx SpecContext) {
		policies, _ := configs.Policies(configs.Options{})
		for _, p := range policies {
			got := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			Eventually(func(g Gomega) {
				g.Expect(stack.Client.Get(ctx, client.ObjectKey{Name: p.Name}, got)).To(Succeed())
				g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
				g.Expect(got.Status.TypeChecking).NotTo(BeNil())
			}).WithContext(ctx).Should(Succeed())
			var warnings []string
			for _, w := range got.Status.TypeChecking.ExpressionWarnings {
				warnings = append(warnings, fmt.Sprintf("%s: %s", w.FieldRef, w.Warning))
			}
			Expect(warnings).To(BeEmpty(), "policy %s", p.Name)
		}
	})

	It("refuse a pod with a SpiderSubnet annotation, saying how to write it with ippools", func(ctx SpecContext) {
		ns := newNamespace(ctx, "subnet")
		for _, key := range configs.SpiderSubnetAnnotations {
			err := stack.Client.Create(ctx, newPod(ns, "subnet", map[string]string{key: `{"ipv4":["10.10.0.0/24"]}`}))
			Expect(err).To(MatchError(And(ContainSubstring(key), ContainSubstring("nicpool has no SpiderSubnet"), ContainSubstring(annotations.IPPools))))
		}
	})
})

// eventsOf returns the messages of the events with reason about the object kind/name.
func eventsOf(ctx context.Context, ns, kind, name, reason string) []string {
	GinkgoHelper()
	events := &corev1.EventList{}
	Expect(stack.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}
