package memory

import (
	"context"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/webhook/admission/views"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// BenchmarkCacheHeapByKind splits the resident figures of BenchmarkResidentMemory by
// what the binaries cache: for each kind, an informer cache like theirs is started in
// this process against the same cluster and the live Go heap it adds is reported.
// ipamd strips managedFields and watches only its node's pods; the webhook's manager
// caches every pod of the cluster as metadata and every endpoint, reduced to what it
// reads (gc.TransformPodMetadata, views.TransformEndpoint).
func BenchmarkCacheHeapByKind(b *testing.B) {
	f := benchCluster(b)
	node := fields.OneTermEqualSelector("spec.nodeName", f.node(0))
	cases := []struct {
		name  string
		obj   client.Object
		list  client.ObjectList
		by    cache.ByObject
		strip bool
	}{
		{"pods-all", &corev1.Pod{}, &corev1.PodList{}, cache.ByObject{}, false},
		{"pods-all-stripped", &corev1.Pod{}, &corev1.PodList{}, cache.ByObject{}, true},
		{"pods-all-webhook", gc.PodMetadata(), &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}, cache.ByObject{Transform: gc.TransformPodMetadata}, false},
		{"pods-node-stripped", &corev1.Pod{}, &corev1.PodList{}, cache.ByObject{Field: node}, true},
		{"endpoints", &v2beta1.SpiderEndpoint{}, &v2beta1.SpiderEndpointList{}, cache.ByObject{}, false},
		{"endpoints-stripped", &v2beta1.SpiderEndpoint{}, &v2beta1.SpiderEndpointList{}, cache.ByObject{}, true},
		{"endpoints-webhook", &v2beta1.SpiderEndpoint{}, &v2beta1.SpiderEndpointList{}, cache.ByObject{Transform: views.TransformEndpoint}, false},
		{"pools", &v2beta1.SpiderIPPool{}, &v2beta1.SpiderIPPoolList{}, cache.ByObject{}, false},
		{"pools-stripped", &v2beta1.SpiderIPPool{}, &v2beta1.SpiderIPPoolList{}, cache.ByObject{}, true},
	}
	for b.Loop() {
		for _, c := range cases {
			heap, n := cacheHeap(b, c.obj, c.list, c.by, c.strip)
			b.ReportMetric(mib(heap), c.name+"-MiB")
			b.Logf("%-20s %6d objects cached: %6.1f MiB of live heap, %5.0f bytes each", c.name, n, mib(heap), float64(heap)/float64(max(n, 1)))
		}
	}
}

// cacheHeap starts a cache of one kind, waits for it to sync, and returns the live
// heap it added and how many objects it holds.
func cacheHeap(b *testing.B, obj client.Object, list client.ObjectList, by cache.ByObject, strip bool) (int64, int) {
	b.Helper()
	opts := cache.Options{Scheme: env.Scheme, ByObject: map[client.Object]cache.ByObject{obj: by}}
	if strip {
		opts.DefaultTransform = cache.TransformStripManagedFields()
	}
	before := liveHeap()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.GetInformer(ctx, obj); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatalf("cache of %T did not sync", obj)
	}
	added := liveHeap() - before
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		b.Fatal(err)
	}
	n := meta.LenList(list)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return added, n
}

// liveHeap is the heap still reachable after two collections.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
