package daemon_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// BenchmarkMemory10Pools measures what one ipamd holds for 10 pools of 1000 addresses
// allocated on its node (its IPBlocks) and the 10000 endpoints recording them (design
// goal: under 64 MiB resident). It reports the Go heap the daemon adds once its caches
// are synced.
func BenchmarkMemory10Pools(b *testing.B) {
	ctx := context.Background()
	const pools, perPool = 10, 1000
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		ns := fmt.Sprintf("mem-%d", iter)
		createNamespace(b, ns)
		sem := make(chan struct{}, 50)
		var wg sync.WaitGroup
		for p := range pools {
			name := fmt.Sprintf("%s-pool-%d", ns, p)
			fixtures.CreatePool(b, env.Client, fixtures.Pool(name, fmt.Sprintf("10.%d.0.0/16", 100+10*iter+p), []string{fmt.Sprintf("10.%d.0.1-10.%d.3.232", 100+10*iter+p, 100+10*iter+p)}))
			pool := fixtures.GetPool(b, env.Client, name)
			recs := v2beta1.PoolIPAllocations{}
			for i := range perPool {
				addr := fmt.Sprintf("10.%d.%d.%d", 100+10*iter+p, i/250, i%250+1)
				pod := fmt.Sprintf("p%d-%d", p, i)
				uid := fmt.Sprintf("00000000-0000-0000-%04d-%012d", p, i)
				recs[addr] = v2beta1.PoolIPAllocation{Pod: ns + "/" + pod, PodUID: uid, Interface: "eth0"}
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					cidr, poolName := addr+"/16", name
					ep := &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod},
						Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: uid, Node: "mem-node",
							IPs: []v2beta1.IPAllocationDetail{{Interface: "eth0", IPv4: &cidr, IPv4Pool: &poolName}}}, OwnerControllerType: "Pod", OwnerControllerName: pod}}
					if err := env.Client.Create(ctx, ep); err != nil {
						b.Error(err)
					}
				})
			}
			// The node's blocks, as its ADDs would have written them.
			node := ledger.New(ledger.Options{Node: "mem-node", Cache: env.Client, Client: env.Client, Fresh: env.Client, Log: logr.Discard()})
			if err := node.Import(ctx, pool, recs); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		before := heapInUse()
		b.StartTimer()
		d, stop := startDaemon(b, "mem-node")
		b.StopTimer()
		var eps v2beta1.SpiderEndpointList
		if err := d.Cache.List(ctx, &eps, client.InNamespace(ns)); err != nil || len(eps.Items) != pools*perPool {
			b.Fatalf("cache holds %d endpoints (%v)", len(eps.Items), err)
		}
		added := heapInUse() - before
		b.Logf("one ipamd with %d pools of %d allocated addresses and %d endpoints cached: %.1f MiB of Go heap", pools, perPool, pools*perPool, float64(added)/(1<<20))
		b.ReportMetric(float64(added)/(1<<20), "heap-MiB")
		stop()
	}
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}
