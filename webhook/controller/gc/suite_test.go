package gc_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/webhook/admission/views"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// The suite runs one control plane and one manager with the garbage collector and the
// pool finalizer, leader-elected as in the webhook Deployment. There is no
// kube-controller-manager: the tests create pods themselves (with owner references
// where a StatefulSet would) and set their phase as the kubelet would, and fill pool
// blocks and endpoints as ipamd would.

var (
	env *testenv.Env
	k8s client.Client
	mgr ctrl.Manager
	ctx context.Context
)

func TestGC(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "garbage collector against a real kube-apiserver")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	var err error
	env, err = testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	k8s = env.Client

	mgr, err = ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                  env.Scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "nicpool-gc-test",
		LeaderElectionNamespace: "default",
		// The cache as nicpool-webhook configures it: every test below runs on pods
		// and endpoints reduced to what the webhook reads.
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				gc.PodMetadata():          {Transform: gc.TransformPodMetadata},
				&corev1.Node{}:            {Transform: gc.TransformNode},
				&v2beta1.SpiderEndpoint{}: {Transform: views.TransformEndpoint},
			},
		},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(gc.SetupWithManager(mgr, gc.Options{
		Interval:         5 * time.Second,
		MinAge:           ptr.To(300 * time.Millisecond),
		TerminatingGrace: ptr.To(time.Duration(0)), // release as soon as deletionTimestamp passes
		Debounce:         100 * time.Millisecond,
	})).To(Succeed())

	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done).Should(Receive(BeNil()))
	})
})

// --- what ipamd and the kubelet would do ---

func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

var subnets atomic.Int32

// newPool creates a pool of 10.<n>.0.0/24 and returns it with its first addresses.
func newPool(name string) (*v2beta1.SpiderIPPool, func(i int) string) {
	n := subnets.Add(1)
	pool := fixtures.Pool(name, fmt.Sprintf("10.%d.0.0/24", n), []string{fmt.Sprintf("10.%d.0.1-10.%d.0.250", n, n)})
	Expect(k8s.Create(ctx, pool)).To(Succeed())
	return pool, func(i int) string { return fmt.Sprintf("10.%d.0.%d", n, i) }
}

type podOpt func(*corev1.Pod)

func onNode(p *corev1.Pod) { p.Spec.NodeName = "node-a" }

func ownedBy(set *appsv1.StatefulSet) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: set.Name, UID: set.UID, Controller: ptr.To(true),
		}}
	}
}

// runningPod creates a pod and marks it Running, as the kubelet would.
func runningPod(ns, name string, opts ...podOpt) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	for _, o := range opts {
		o(pod)
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	setPhase(pod, corev1.PodRunning)
	return pod
}

func setPhase(pod *corev1.Pod, phase corev1.PodPhase) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		pod.Status.Phase = phase
		return k8s.Status().Update(ctx, pod)
	})).To(Succeed())
}

// hold records addresses in a pool's blocks on node-a, through the ledger as ipamd's
// writes go (compare-and-swap on each block).
func hold(pool string, holders map[string]v2beta1.PoolIPAllocation) {
	var p v2beta1.SpiderIPPool
	Expect(k8s.Get(ctx, client.ObjectKey{Name: pool}, &p)).To(Succeed())
	node := ledger.New(ledger.Options{Node: "node-a", Cache: k8s, Client: k8s, Fresh: k8s, Log: GinkgoLogr})
	Expect(node.Import(ctx, &p, holders)).To(Succeed())
}

func holder(pod *corev1.Pod, iface string) v2beta1.PoolIPAllocation {
	return v2beta1.PoolIPAllocation{Pod: pod.Namespace + "/" + pod.Name, PodUID: string(pod.UID), Interface: iface}
}

// recordEndpoint writes the pod's SpiderEndpoint as ipamd does, one entry per address.
func recordEndpoint(pod *corev1.Pod, ownerKind, ownerName string, ips map[string]string) *v2beta1.SpiderEndpoint {
	ep := &v2beta1.SpiderEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		Status: v2beta1.WorkloadEndpointStatus{
			Current:             v2beta1.PodIPAllocation{UID: string(pod.UID), Node: "node-a"},
			OwnerControllerType: ownerKind, OwnerControllerName: ownerName,
		},
	}
	for iface, addr := range ips {
		ep.Status.Current.IPs = append(ep.Status.Current.IPs, v2beta1.IPAllocationDetail{Interface: iface, IPv4: ptr.To(addr + "/24")})
	}
	Expect(k8s.Create(ctx, ep)).To(Succeed())
	return ep
}

// --- what a user observes ---

// allocated is what the pool's addresses are allocated to, through the ledger's
// listing, which also reports blocks whose counts disagree with their records.
func allocated(pool string) v2beta1.PoolIPAllocations {
	recs, bad, err := ledger.List(ctx, k8s)
	Expect(err).NotTo(HaveOccurred())
	Expect(bad).To(BeEmpty(), "blocks must be written consistently")
	out := v2beta1.PoolIPAllocations{}
	for _, r := range recs {
		if r.Pool == pool {
			out[r.Addr.String()] = r.Holder
		}
	}
	return out
}

func allocatedFn(pool string) func() v2beta1.PoolIPAllocations {
	return func() v2beta1.PoolIPAllocations { return allocated(pool) }
}

func endpointExists(ns, name string) func() bool {
	return func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v2beta1.SpiderEndpoint{})
		if apierrors.IsNotFound(err) {
			return false
		}
		Expect(err).NotTo(HaveOccurred())
		return true
	}
}

// releases reads nicpool_gc_releases_total{reason} from the manager's registry.
func releases(reason gc.Reason) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "nicpool_gc_releases_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == string(reason) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func apierrorsIsNotFound(err error) bool { return apierrors.IsNotFound(err) }
