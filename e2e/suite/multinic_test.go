package suite

import (
	"fmt"
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// newPool creates an IPv4 pool for one spec and deletes it once the spec's pods are
// gone (the webhook refuses to delete a pool that still holds addresses).
func newPool(ctx SpecContext, name, subnet, ipRange string) *v2beta1.SpiderIPPool {
	GinkgoHelper()
	pool := fixtures.Pool(name, subnet, []string{ipRange})
	Expect(stack.Client.Create(ctx, pool)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Eventually(func() error { return client.IgnoreNotFound(stack.Client.Delete(ctx, pool)) }).WithContext(ctx).Should(Succeed())
	})
	return pool
}

// inSubnet asserts every address is inside prefix.
func inSubnet(addrs []string, prefix string) bool {
	p := netip.MustParsePrefix(prefix)
	for _, a := range addrs {
		if !p.Contains(netip.MustParseAddr(a)) {
			return false
		}
	}
	return len(addrs) > 0
}

var _ = Describe("multi-NIC pool selection", func() {
	It("follows explicit interface names in both Multus annotation forms, named and unnamed entries", func(ctx SpecContext) {
		ns := newNamespace(ctx, "forms")
		named := `[{"interface":"eth0","ipv4":["eth0-v4"]},{"interface":"data0","ipv4":["net1-v4"],"ipv6":["net1-v6"]}]`
		cases := map[string]map[string]string{
			"json-named": {
				annotations.MultusNetworks: `[{"name":"net1","namespace":"default","interface":"data0"}]`,
				annotations.IPPools:        named,
			},
			"short-unnamed": {
				annotations.MultusNetworks: "default/net1@data0",
				annotations.IPPools:        `[{"ipv4":["eth0-v4"]},{"ipv4":["net1-v4"],"ipv6":["net1-v6"]}]`,
			},
		}
		for name, ann := range cases {
			Expect(stack.Client.Create(ctx, newPod(ns, name, ann))).To(Succeed())
		}
		for name := range cases {
			p := runningPod(ctx, ns, name, "")
			Expect(p.Annotations[annotations.IPPools]).To(ContainSubstring(`"interface":"data0"`), name)
			addrs := nicAddresses(p)
			Expect(addrs).To(HaveLen(2), name)
			Expect(inSubnet(addrs["eth0"], "10.10.0.0/24")).To(BeTrue(), "%s eth0 %v", name, addrs["eth0"])
			Expect(addrs["data0"]).To(HaveLen(2), name)
			Expect(interfaceAddrs(p)).To(HaveKey("data0"), name)
		}
		checkInvariants(ctx)
	})

	It("expands wildcard pool names to the pools of the right family", func(ctx SpecContext) {
		ns := newNamespace(ctx, "wild")
		Expect(stack.Client.Create(ctx, newPod(ns, "wild", twoNICAnnotations(
			`[{"ipv4":["eth0-*"],"ipv6":["eth0-*"]},{"ipv4":["net1-*"]}]`)))).To(Succeed())
		p := runningPod(ctx, ns, "wild", "")
		Expect(p.Annotations[annotations.IPPools]).To(And(ContainSubstring(`"eth0-v4"`), ContainSubstring(`"eth0-v6"`), ContainSubstring(`"net1-v4"`)))
		addrs := nicAddresses(p)
		Expect(addrs["eth0"]).To(HaveLen(2))
		Expect(inSubnet(addrs["net1"], "10.20.0.0/24")).To(BeTrue(), "net1 %v", addrs["net1"])
		checkInvariants(ctx)
	})

	It("uses the namespace's default pools, else the cluster's default pools", func(ctx SpecContext) {
		ns := newNamespace(ctx, "nsdefault")
		pool := newPool(ctx, ns+"-v4", "10.50.0.0/24", "10.50.0.10-10.50.0.20")
		namespace := &corev1.Namespace{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		namespace.Annotations = map[string]string{annotations.NamespaceDefaultIPv4Pool: fmt.Sprintf("[%q]", pool.Name)}
		Expect(stack.Client.Update(ctx, namespace)).To(Succeed())
		Expect(stack.Client.Create(ctx, newPod(ns, "plain", nil))).To(Succeed())
		p := runningPod(ctx, ns, "plain", "")
		Expect(inSubnet([]string{p.Status.PodIP}, "10.50.0.0/24")).To(BeTrue(), "pod IP %s from the namespace default", p.Status.PodIP)

		other := newNamespace(ctx, "clusterdefault")
		Expect(stack.Client.Create(ctx, newPod(other, "plain", nil))).To(Succeed())
		q := runningPod(ctx, other, "plain", "")
		Expect(nicAddresses(q)["eth0"]).To(HaveLen(2), "both cluster default pools (eth0-v4, eth0-v6)")
		Expect(inSubnet([]string{q.Status.PodIP}, "10.10.0.0/24")).To(BeTrue(), "pod IP %s from eth0-v4", q.Status.PodIP)
		DeferCleanup(func(ctx SpecContext) {
			Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
		})
		checkInvariants(ctx)
	})

	It("changes only the interface whose pool changed when a StatefulSet's selection is updated (I5)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "repool")
		alt := newPool(ctx, ns+"-alt", "10.60.0.0/24", "10.60.0.10-10.60.0.20")
		sts := newStatefulSet(ns, "db", 1, twoNICAnnotations(unnamedTwoNICs))
		Expect(stack.Client.Create(ctx, sts)).To(Succeed())
		before := nicAddresses(runningPod(ctx, ns, "db-0", ""))
		old := getPod(ctx, ns, "db-0")

		By("pointing net1's IPv4 at another pool")
		Eventually(func() error {
			if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
				return err
			}
			sts.Spec.Template.Annotations[annotations.IPPools] = fmt.Sprintf(`[{"ipv4":["eth0-v4"],"ipv6":["eth0-v6"]},{"ipv4":[%q],"ipv6":["net1-v6"]}]`, alt.Name)
			return stack.Client.Update(ctx, sts)
		}).WithContext(ctx).Should(Succeed())
		after := nicAddresses(runningPod(ctx, ns, "db-0", old.UID))
		Expect(after["eth0"]).To(Equal(before["eth0"]))
		var v4, v6 []string
		for _, a := range after["net1"] {
			if netip.MustParseAddr(a).Is4() {
				v4 = append(v4, a)
			} else {
				v6 = append(v6, a)
			}
		}
		Expect(inSubnet(v4, "10.60.0.0/24")).To(BeTrue(), "net1 IPv4 %v from the new pool", v4)
		Expect(before["net1"]).To(ContainElements(v6), "net1 IPv6 kept")
		DeferCleanup(func(ctx SpecContext) {
			Expect(stack.Client.Delete(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
			Expect(stack.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
		})
		checkInvariants(ctx)
	})
})
