package suite

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// asUserWith binds a ClusterRole of verbs on IPBlocks to a new user and returns a
// client acting as that user, through impersonation by the admin.
func asUserWith(ctx context.Context, name string, verbs ...string) client.Client {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{ipamv1alpha1.GroupVersion.Group}, Resources: []string{"ipblocks"}, Verbs: verbs}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		Expect(stack.Client.Create(ctx, o)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(stack.Client.Delete(ctx, o))).To(Succeed()) })
	}
	cfg := rest.CopyConfig(stack.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: stack.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = Describe("the allocation records, against a user with rights on IPBlocks but not override", func() {
	It("lose no record of a running pod, by any request or by the garbage collector afterwards, and a new pod gets another address", func(ctx SpecContext) {
		ns := newNamespace(ctx, "records")
		Expect(stack.Client.Create(ctx, newPod(ns, "live", nil))).To(Succeed())
		live := runningPod(ctx, ns, "live", "")
		held := allocationsOf(ctx, ns+"/live")
		Expect(held).NotTo(BeEmpty())

		var blocks ipamv1alpha1.IPBlockList
		Expect(stack.Client.List(ctx, &blocks)).To(Succeed())
		var mine []ipamv1alpha1.IPBlock
		for _, b := range blocks.Items {
			for _, rec := range b.Status.Allocations {
				if rec.PodUID == string(live.UID) {
					mine = append(mine, b)
					break
				}
			}
		}
		Expect(mine).NotTo(BeEmpty())

		mallory := asUserWith(ctx, "mallory-"+ns, "get", "list", "patch", "delete", "deletecollection")
		refused := MatchError(ContainSubstring("ValidatingAdmissionPolicy '" + configs.BlocksPolicy + "'"))
		patch := func(b ipamv1alpha1.IPBlock, pt types.PatchType, body string) error {
			return mallory.Patch(ctx, &ipamv1alpha1.IPBlock{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}, client.RawPatch(pt, []byte(body)))
		}
		By("every request that would erase a record, or have the garbage collector erase it, is refused")
		for _, b := range mine {
			Expect(mallory.Delete(ctx, b.DeepCopy())).To(refused)
			Expect(mallory.Delete(ctx, b.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(refused)
			Expect(mallory.DeleteAllOf(ctx, &ipamv1alpha1.IPBlock{}, client.MatchingFields{ipamv1alpha1.FieldPool: b.Spec.Pool})).To(refused)
			Expect(patch(b, types.MergePatchType, `{"metadata":{"ownerReferences":[{"apiVersion":"spiderpool.spidernet.io/v2beta1","kind":"SpiderIPPool","name":"`+b.Spec.Pool+`","uid":"00000000-0000-4000-8000-00000000dead"}]}}`)).To(refused)
			Expect(patch(b, types.JSONPatchType, `[{"op":"remove","path":"/metadata/ownerReferences"}]`)).To(refused)
			Expect(patch(b, types.MergePatchType, `{"metadata":{"finalizers":["example.com/hold"]}}`)).To(refused)
			Expect(patch(b, types.MergePatchType, `{"status":{"allocations":null}}`)).To(refused)
			Expect(patch(b, types.MergePatchType, `{"metadata":{"labels":{"example.com/seen":"yes"}}}`)).To(Succeed())
		}

		By("the garbage collector runs (it deletes an object whose owner does not exist), and every record is still there")
		orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "00000000-0000-4000-8000-00000000beef",
		}}}}
		Expect(stack.Client.Create(ctx, orphan)).To(Succeed())
		Eventually(func() error {
			return stack.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.ConfigMap{})
		}).WithContext(ctx).Should(MatchError(ContainSubstring("not found")))
		Expect(allocationsOf(ctx, ns+"/live")).To(Equal(held))

		By("a new pod gets addresses of its own")
		Expect(stack.Client.Create(ctx, newPod(ns, "next", nil))).To(Succeed())
		runningPod(ctx, ns, "next", "")
		next := allocationsOf(ctx, ns+"/next")
		Expect(next).To(HaveLen(len(held)))
		for _, h := range held {
			Expect(next).NotTo(ContainElement(h))
		}
		checkInvariants(ctx)
	})
})

var _ = Describe("nicpool's pod annotations after the pod is created", func() {
	It("cannot be edited: the API server refuses, saying to recreate the pod", func(ctx SpecContext) {
		ns := newNamespace(ctx, "fixed")
		Expect(stack.Client.Create(ctx, newPod(ns, "sel", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["eth0-v4"]}]`}))).To(Succeed())
		p := runningPod(ctx, ns, "sel", "")
		for _, body := range []string{
			`{"metadata":{"annotations":{"` + annotations.IPPools + `":"[{\"interface\":\"eth0\",\"ipv4\":[\"*\"]}]"}}}`,
			`{"metadata":{"annotations":{"` + annotations.IPPools + `":null}}}`,
			`{"metadata":{"annotations":{"` + annotations.IPPool + `":"{\"ipv4\":[\"eth0-v4\"]}"}}}`,
		} {
			err := stack.Client.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(body)))
			Expect(err).To(MatchError(And(ContainSubstring("ValidatingAdmissionPolicy '"+configs.PodsPolicy+"'"), ContainSubstring("Forbidden"),
				ContainSubstring("delete the pod and create it again with the new annotations"))), body)
		}
		Expect(stack.Client.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/team":"a"}}}`)))).To(Succeed())
		checkInvariants(ctx)
	})
})
