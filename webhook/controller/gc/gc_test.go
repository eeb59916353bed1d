package gc_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

var _ = Describe("garbage collector", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("releases every interface's address and the endpoint of a deleted pod", func() {
		pool, addr := newPool("deleted-" + ns)
		pod := runningPod(ns, "a")
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(pod, "eth0"), addr(2): holder(pod, "net1")})
		recordEndpoint(pod, "None", "", map[string]string{"eth0": addr(1), "net1": addr(2)})
		before := releases(gc.ReasonPodDeleted)

		Expect(k8s.Delete(ctx, pod)).To(Succeed())

		Eventually(allocatedFn(pool.Name)).Should(BeEmpty())
		Eventually(endpointExists(ns, "a")).Should(BeFalse())
		Expect(releases(gc.ReasonPodDeleted) - before).To(BeNumerically(">=", 2))
	})

	It("releases the addresses of Succeeded and Failed pods that still exist", func() {
		pool, addr := newPool("finished-" + ns)
		done, failed, live := runningPod(ns, "done"), runningPod(ns, "failed"), runningPod(ns, "live")
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{
			addr(1): holder(done, "eth0"), addr(2): holder(failed, "eth0"), addr(3): holder(live, "eth0"),
		})
		recordEndpoint(done, "Job", "job", map[string]string{"eth0": addr(1)})

		setPhase(done, corev1.PodSucceeded)
		setPhase(failed, corev1.PodFailed)

		Eventually(allocatedFn(pool.Name)).Should(And(HaveLen(1), HaveKeyWithValue(addr(3), holder(live, "eth0"))))
		Eventually(endpointExists(ns, "done")).Should(BeFalse())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(done), &corev1.Pod{})).To(Succeed(), "the pod object itself stays")
	})

	It("releases a pod stuck terminating past its grace period", func() {
		pool, addr := newPool("terminating-" + ns)
		pod := runningPod(ns, "stuck", onNode) // bound: deletion is graceful, and no kubelet finishes it
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(pod, "eth0")})

		Expect(k8s.Delete(ctx, pod, client.GracePeriodSeconds(1))).To(Succeed())

		Eventually(allocatedFn(pool.Name)).Should(BeEmpty())
		var still corev1.Pod
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &still)).To(Succeed())
		Expect(still.DeletionTimestamp).NotTo(BeNil(), "the pod is still terminating; only its address is freed")
		Expect(releases(gc.ReasonPodTerminating)).To(BeNumerically(">=", 1))
	})

	It("releases records and endpoints of a pod UID that never existed", func() {
		pool, addr := newPool("ghost-" + ns)
		ghost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost", UID: types.UID("no-such-uid")}}
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(ghost, "eth0")})
		recordEndpoint(ghost, "None", "", map[string]string{"eth0": addr(1)})

		Eventually(allocatedFn(pool.Name)).Should(BeEmpty())
		Eventually(endpointExists(ns, "ghost")).Should(BeFalse())
	})

	It("completes a release interrupted after the endpoint was deleted, and a second pass changes nothing", func() {
		pool, addr := newPool("idempotent-" + ns)
		pod := runningPod(ns, "a")
		keep := runningPod(ns, "b")
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(pod, "eth0"), addr(2): holder(keep, "eth0")})
		// No endpoint: a previous pass deleted it and stopped before the pool write.
		Expect(k8s.Delete(ctx, pod)).To(Succeed())

		_, err := gc.RunOnce(ctx, k8s, k8s)
		Expect(err).NotTo(HaveOccurred())
		Eventually(allocatedFn(pool.Name)).Should(HaveLen(1))

		before := blockVersions(pool.Name)
		res, err := gc.RunOnce(ctx, k8s, k8s)
		Expect(err).NotTo(HaveOccurred())
		Expect(inNamespace(res, ns)).To(BeEmpty(), "a second pass releases nothing more")
		Expect(blockVersions(pool.Name)).To(Equal(before), "a second pass writes nothing")
		Expect(allocated(pool.Name)).To(HaveKeyWithValue(addr(2), holder(keep, "eth0")))
	})

	Describe("StatefulSets", func() {
		var set *appsv1.StatefulSet
		BeforeEach(func() {
			set = &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
				Spec: appsv1.StatefulSetSpec{
					Replicas:    ptr.To[int32](2),
					ServiceName: "web",
					Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
					},
				},
			}
			Expect(k8s.Create(ctx, set)).To(Succeed())
		})

		scale := func(replicas int32) {
			patch := client.MergeFrom(set.DeepCopy())
			set.Spec.Replicas = ptr.To(replicas)
			Expect(k8s.Patch(ctx, set, patch)).To(Succeed())
		}

		It("keeps the addresses of an ordinal that will come back, releases those scaled away", func() {
			pool, addr := newPool("sts-" + ns)
			web0, web1 := runningPod(ns, "web-0", ownedBy(set)), runningPod(ns, "web-1", ownedBy(set))
			web2 := runningPod(ns, "web-2", ownedBy(set)) // above replicas, but live: scale-down in progress
			sentinel := runningPod(ns, "plain")
			hold(pool.Name, map[string]v2beta1.PoolIPAllocation{
				addr(1): holder(web0, "eth0"), addr(2): holder(web1, "eth0"), addr(3): holder(web1, "net1"),
				addr(4): holder(web2, "eth0"), addr(5): holder(sentinel, "eth0"),
			})
			recordEndpoint(web0, "StatefulSet", "web", map[string]string{"eth0": addr(1)})
			recordEndpoint(web1, "StatefulSet", "web", map[string]string{"eth0": addr(2), "net1": addr(3)})
			recordEndpoint(web2, "StatefulSet", "web", map[string]string{"eth0": addr(4)})

			By("web-1 absent between delete and re-create, a plain pod deleted beside it")
			Expect(k8s.Delete(ctx, web1)).To(Succeed())
			Expect(k8s.Delete(ctx, sentinel)).To(Succeed())
			// The plain pod's release proves a pass ran after both deletions, past the
			// minimum age of both: web-1's records were judged and kept.
			Eventually(allocatedFn(pool.Name)).ShouldNot(HaveKey(addr(5)))
			res, err := gc.RunOnce(ctx, k8s, k8s)
			Expect(err).NotTo(HaveOccurred())
			Expect(inNamespace(res, ns)).To(BeEmpty())
			Expect(allocated(pool.Name)).To(And(HaveLen(4),
				HaveKeyWithValue(addr(2), holder(web1, "eth0")), HaveKeyWithValue(addr(3), holder(web1, "net1"))))
			Expect(endpointExists(ns, "web-1")()).To(BeTrue(), "web-1's endpoint stays for the takeover")
			Expect(allocated(pool.Name)).To(HaveKey(addr(4)), "live web-2 keeps its address while above replicas")

			By("web-2 deleted while above replicas")
			Expect(k8s.Delete(ctx, web2)).To(Succeed())
			Eventually(allocatedFn(pool.Name)).ShouldNot(HaveKey(addr(4)))
			Eventually(endpointExists(ns, "web-2")).Should(BeFalse())

			By("scaled down to 1: absent web-1 goes, live web-0 stays")
			scaledBefore := releases(gc.ReasonStatefulSetScaledDown)
			scale(1)
			Eventually(allocatedFn(pool.Name)).Should(And(HaveLen(1), HaveKeyWithValue(addr(1), holder(web0, "eth0"))))
			Eventually(endpointExists(ns, "web-1")).Should(BeFalse())
			Expect(releases(gc.ReasonStatefulSetScaledDown) - scaledBefore).To(BeNumerically(">=", 2))

			By("StatefulSet deleted, web-0 orphaned but live, then deleted")
			// No kube-controller-manager here: the pods outlive their StatefulSet.
			Expect(k8s.Delete(ctx, set)).To(Succeed())
			Eventually(func() error {
				return k8s.Get(ctx, client.ObjectKeyFromObject(set), &appsv1.StatefulSet{})
			}).Should(Satisfy(apierrorsIsNotFound))
			res, err = gc.RunOnce(ctx, k8s, k8s)
			Expect(err).NotTo(HaveOccurred())
			Expect(inNamespace(res, ns)).To(BeEmpty(), "a live pod keeps its address whatever its StatefulSet does")
			// The pod is terminating and its StatefulSet is gone: either reason is right,
			// depending on whether the collector's cache has seen the StatefulSet go yet.
			goneOrTerminating := func() float64 {
				return releases(gc.ReasonStatefulSetGone) + releases(gc.ReasonPodTerminating)
			}
			goneBefore := goneOrTerminating()
			Expect(k8s.Delete(ctx, web0)).To(Succeed())
			Eventually(allocatedFn(pool.Name)).Should(BeEmpty())
			Eventually(endpointExists(ns, "web-0")).Should(BeFalse())
			Expect(goneOrTerminating() - goneBefore).To(BeNumerically(">=", 1))
		})

		It("keeps a finished StatefulSet pod's addresses for its replacement", func() {
			pool, addr := newPool("sts-failed-" + ns)
			web0 := runningPod(ns, "web-0", ownedBy(set))
			hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(web0, "eth0")})
			setPhase(web0, corev1.PodFailed)

			res, err := gc.RunOnce(ctx, k8s, k8s)
			Expect(err).NotTo(HaveOccurred())
			Expect(inNamespace(res, ns)).To(BeEmpty())
			Expect(allocated(pool.Name)).To(HaveKeyWithValue(addr(1), holder(web0, "eth0")))
		})

		It("releases an earlier incarnation's address once the new pod holds its own", func() {
			poolA, addrA := newPool("sts-old-" + ns)
			poolB, addrB := newPool("sts-new-" + ns)
			old := runningPod(ns, "web-0", ownedBy(set))
			hold(poolA.Name, map[string]v2beta1.PoolIPAllocation{addrA(1): holder(old, "eth0"), addrA(2): holder(old, "net1")})
			Expect(k8s.Delete(ctx, old)).To(Succeed())
			// The new pod's eth0 pool changed: it got a fresh address in pool B; net1 awaits takeover.
			cur := runningPod(ns, "web-0", ownedBy(set))
			hold(poolB.Name, map[string]v2beta1.PoolIPAllocation{addrB(1): holder(cur, "eth0")})
			recordEndpoint(cur, "StatefulSet", "web", map[string]string{"eth0": addrB(1)})

			Eventually(allocatedFn(poolA.Name)).Should(And(HaveLen(1), HaveKeyWithValue(addrA(2), holder(old, "net1"))))
			Expect(allocated(poolB.Name)).To(HaveKeyWithValue(addrB(1), holder(cur, "eth0")))
			Expect(releases(gc.ReasonSuperseded)).To(BeNumerically(">=", 1))
		})
	})

	It("keeps the address of a pod the cache has not seen yet", func() {
		pool, addr := newPool("unseen-" + ns)
		pod := runningPod(ns, "new")
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(pod, "eth0")})
		recordEndpoint(pod, "None", "", map[string]string{"eth0": addr(1)})

		lagging := laggingCache{Client: k8s, hidePods: map[types.UID]bool{pod.UID: true}}
		res, err := gc.RunOnce(ctx, lagging, k8s)

		Expect(err).NotTo(HaveOccurred())
		Expect(inNamespace(res, ns)).To(BeEmpty(), "the live read finds the pod")
		Expect(allocated(pool.Name)).To(HaveKeyWithValue(addr(1), holder(pod, "eth0")))
		Expect(endpointExists(ns, "new")()).To(BeTrue())
	})

	It("keeps an ordinal the cache believes scaled away while the API server says it returns", func() {
		pool, addr := newPool("stale-sts-" + ns)
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		Expect(k8s.Create(ctx, set)).To(Succeed())
		db1 := runningPod(ns, "db-1", ownedBy(set))
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(db1, "eth0")})
		recordEndpoint(db1, "StatefulSet", "db", map[string]string{"eth0": addr(1)})
		Expect(k8s.Delete(ctx, db1)).To(Succeed()) // between delete and re-create

		before := set.DeepCopy()
		before.Spec.Replicas = ptr.To[int32](1) // the cache has not seen the scale-up yet
		lagging := laggingCache{Client: k8s, staleSets: map[string]*appsv1.StatefulSet{"db": before}}
		res, err := gc.RunOnce(ctx, lagging, k8s)

		Expect(err).NotTo(HaveOccurred())
		Expect(inNamespace(res, ns)).To(BeEmpty(), "the live read finds replicas 2")
		Expect(allocated(pool.Name)).To(HaveKeyWithValue(addr(1), holder(db1, "eth0")))
		Expect(endpointExists(ns, "db-1")()).To(BeTrue())
	})

	It("never releases a live pod's address while pods churn", func() {
		pool, addr := newPool("churn-" + ns)
		const pods = 60
		var (
			mu      sync.Mutex
			live    = map[string]bool{} // pod UIDs never deleted
			wrongly []string
		)
		stop := make(chan struct{})
		collectors := sync.WaitGroup{}
		// Forced passes on the manager's cache, which lags behind the writes below, beside
		// the manager's own collector: every record is written right after its pod.
		for range 2 {
			collectors.Go(func() {
				defer GinkgoRecover()
				for {
					select {
					case <-stop:
						return
					default:
					}
					res, err := gc.RunOnce(ctx, mgr.GetClient(), mgr.GetAPIReader())
					Expect(err).NotTo(HaveOccurred())
					mu.Lock()
					for _, r := range res.Released {
						if live[r.Holder.PodUID] {
							wrongly = append(wrongly, r.Address+" of "+r.Holder.Pod)
						}
					}
					mu.Unlock()
				}
			})
		}

		var churn sync.WaitGroup
		for w := range 3 {
			churn.Go(func() {
				defer GinkgoRecover()
				for i := w; i < pods; i += 3 {
					pod := runningPod(ns, fmt.Sprintf("churn-%d", i))
					deleted := i%2 == 0
					if !deleted {
						mu.Lock()
						live[string(pod.UID)] = true
						mu.Unlock()
					}
					hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(i + 1): holder(pod, "eth0")})
					recordEndpoint(pod, "ReplicaSet", "rs", map[string]string{"eth0": addr(i + 1)})
					if deleted {
						Expect(k8s.Delete(ctx, pod)).To(Succeed())
					}
				}
			})
		}
		churn.Wait()
		close(stop)
		collectors.Wait()

		Expect(wrongly).To(BeEmpty(), "addresses of live pods released")
		// Converged: exactly the live pods hold addresses (I4).
		Eventually(func() []string {
			var uids []string
			for _, h := range allocated(pool.Name) {
				uids = append(uids, h.PodUID)
			}
			return uids
		}).Should(ConsistOf(keys(live)))
		var eps v2beta1.SpiderEndpointList
		Expect(k8s.List(ctx, &eps, client.InNamespace(ns))).To(Succeed())
		Eventually(func() int {
			Expect(k8s.List(ctx, &eps, client.InNamespace(ns))).To(Succeed())
			return len(eps.Items)
		}).Should(Equal(len(live)))
	})
})

var _ = Describe("pool finalizer", func() {
	It("is added to a new pool and removed once a pool being deleted holds no address", func() {
		ns := newNamespace()
		pool, addr := newPool("final-" + ns)
		Eventually(func() []string {
			var p v2beta1.SpiderIPPool
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), &p)).To(Succeed())
			return p.Finalizers
		}).Should(ContainElement(v2beta1.PoolFinalizer))
		pod := runningPod(ns, "a")
		hold(pool.Name, map[string]v2beta1.PoolIPAllocation{addr(1): holder(pod, "eth0")})

		Expect(k8s.Delete(ctx, pool)).To(Succeed())
		// A pass after the deletion (forced here) must leave the pool in place.
		_, err := gc.RunOnce(ctx, k8s, k8s)
		Expect(err).NotTo(HaveOccurred())
		var p v2beta1.SpiderIPPool
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), &p)).To(Succeed(), "a pool holding a live pod's address stays")
		Expect(p.DeletionTimestamp).NotTo(BeNil())
		Expect(allocated(pool.Name)).To(HaveKey(addr(1)))

		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(pool), &v2beta1.SpiderIPPool{})
		}).Should(Satisfy(apierrorsIsNotFound))
	})

	It("lets an empty pool go at once", func() {
		pool, _ := newPool("empty-final")
		Eventually(func() []string {
			var p v2beta1.SpiderIPPool
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), &p)).To(Succeed())
			return p.Finalizers
		}).Should(ContainElement(v2beta1.PoolFinalizer))
		Expect(k8s.Delete(ctx, pool)).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(pool), &v2beta1.SpiderIPPool{})
		}).Should(Satisfy(apierrorsIsNotFound))
	})
})

// blockVersions is the resourceVersion of each block of a pool.
func blockVersions(pool string) map[string]string {
	var list ipamv1alpha1.IPBlockList
	Expect(k8s.List(ctx, &list, client.MatchingFields{ipamv1alpha1.FieldPool: pool})).To(Succeed())
	out := map[string]string{}
	for _, b := range list.Items {
		out[b.Name] = b.ResourceVersion
	}
	return out
}

// inNamespace keeps the releases and endpoint deletions of one test's namespace.
func inNamespace(res gc.Result, ns string) []string {
	var out []string
	for _, r := range res.Released {
		if len(r.Holder.Pod) > len(ns) && r.Holder.Pod[:len(ns)+1] == ns+"/" {
			out = append(out, r.Address+" "+string(r.Reason))
		}
	}
	for _, e := range res.DeletedEndpoints {
		if e.Namespace == ns {
			out = append(out, "endpoint "+e.Name+" "+string(e.Reason))
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// laggingCache is a snapshot reader that has not caught up with the API server yet: it
// hides some pods and shows some StatefulSets as they were. Everything else, and every
// write, goes to the real API server.
type laggingCache struct {
	client.Client
	hidePods  map[types.UID]bool
	staleSets map[string]*appsv1.StatefulSet
}

func (l laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	switch list := list.(type) {
	case *corev1.PodList:
		list.Items = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return l.hidePods[p.UID] })
	case *metav1.PartialObjectMetadataList:
		list.Items = slices.DeleteFunc(list.Items, func(p metav1.PartialObjectMetadata) bool { return l.hidePods[p.UID] })
	case *appsv1.StatefulSetList:
		for i, s := range list.Items {
			if stale, ok := l.staleSets[s.Name]; ok {
				list.Items[i] = *stale
			}
		}
	}
	return nil
}
