package suite

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// checkInvariants waits for the cluster to settle (GC converged) and then asserts
// design.md's invariants with ipamd's checker (I1–I4 over allocation records,
// endpoints and pods),
// plus what a user sees on the pods: every address Multus reported on a running pod
// is allocated to that pod and interface, and no record is left for a pod that is gone.
func checkInvariants(ctx context.Context) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(invariants.Check(ctx, stack.Client, invariants.Options{Converged: true})).To(Succeed())
		g.Expect(invariantViolations(ctx)).To(BeEmpty())
	}).WithContext(ctx).Should(Succeed())
}

func invariantViolations(ctx context.Context) []string {
	records, malformed, err := ledger.List(ctx, stack.Client)
	Expect(err).NotTo(HaveOccurred())
	endpoints := &v2beta1.SpiderEndpointList{}
	pods := &corev1.PodList{}
	sets := &appsv1.StatefulSetList{}
	Expect(stack.Client.List(ctx, endpoints)).To(Succeed())
	Expect(stack.Client.List(ctx, pods)).To(Succeed())
	Expect(stack.Client.List(ctx, sets)).To(Succeed())

	var bad []string
	for _, err := range malformed {
		bad = append(bad, err.Error())
	}
	livePods := map[string]*corev1.Pod{}
	for i := range pods.Items {
		livePods[string(pods.Items[i].UID)] = &pods.Items[i]
	}
	// Ordinals a StatefulSet will (re)create keep their endpoint and addresses.
	returning := map[string]bool{}
	for _, s := range sets.Items {
		for i := int32(0); i < replicas(&s); i++ {
			returning[fmt.Sprintf("%s/%s-%d", s.Namespace, s.Name, i)] = true
		}
	}
	endpointUID := map[string]string{}
	for _, e := range endpoints.Items {
		endpointUID[e.Namespace+"/"+e.Name] = e.Status.Current.UID
		for _, r := range e.Status.Current.IPs {
			if r.Interface == "" {
				bad = append(bad, fmt.Sprintf("I1: endpoint %s/%s records an address without interface", e.Namespace, e.Name))
			}
		}
	}
	type nic struct{ uid, iface string }
	perNIC := map[nic]map[bool]string{}
	owner := map[string]string{}
	held := map[string]v2beta1.PoolIPAllocation{}
	for _, r := range records {
		addr, a, ip := r.Addr.String(), r.Holder, r.Addr
		if a.Interface == "" {
			bad = append(bad, fmt.Sprintf("I1: pool %s records %s without interface", r.Pool, addr))
		}
		if prev, ok := owner[addr]; ok {
			bad = append(bad, fmt.Sprintf("I3: %s allocated in pool %s and pool %s", addr, prev, r.Pool))
		}
		owner[addr] = r.Pool
		held[addr] = a
		k := nic{a.PodUID, a.Interface}
		if perNIC[k] == nil {
			perNIC[k] = map[bool]string{}
		}
		if prev, ok := perNIC[k][ip.Is4()]; ok {
			bad = append(bad, fmt.Sprintf("I2: pod %s (%s) %s holds %s and %s", a.Pod, a.PodUID, a.Interface, prev, addr))
		}
		perNIC[k][ip.Is4()] = addr
		_, live := livePods[a.PodUID]
		comingBack := returning[a.Pod] && endpointUID[a.Pod] == a.PodUID
		if !live && !comingBack {
			bad = append(bad, fmt.Sprintf("I4: %s in pool %s belongs to pod %s (%s), which is gone", addr, r.Pool, a.Pod, a.PodUID))
		}
	}
	for _, p := range livePods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		statuses, _ := local.NetworkStatus(p)
		for _, st := range statuses {
			for _, addr := range st.IPs {
				a, ok := held[addr]
				if !ok || a.PodUID != string(p.UID) || a.Interface != st.Interface {
					bad = append(bad, fmt.Sprintf("I4: running pod %s/%s has %s on %s, not allocated to it (%+v)", p.Namespace, p.Name, addr, st.Interface, a))
				}
			}
		}
	}
	return bad
}

func replicas(s *appsv1.StatefulSet) int32 {
	if s.Spec.Replicas == nil {
		return 1
	}
	return *s.Spec.Replicas
}
