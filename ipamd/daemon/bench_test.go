package daemon_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

// BenchmarkLimit1000 is the limit test after spiderpool's: 1000 pods, one pool of
// exactly 1000 addresses, 10 ipamd instances, every ADD at once against one real API
// server. It reports wall time, allocations per second, API writes per allocation and
// 409 conflicts (from kube-apiserver's apiserver_request_total), p50/p99 per ADD, and
// ends with the invariant check. Pods are created before the clock starts.
var limitRuns atomic.Int32

func BenchmarkLimit1000(b *testing.B) {
	const pods = 1000
	nodes := 10
	if v, err := strconv.Atoi(os.Getenv("NICPOOL_BENCH_NODES")); err == nil && v > 0 && pods%v == 0 {
		nodes = v // for comparisons only; the limit test is 10 nodes
	}
	ctx := context.Background()
	for range b.N {
		// Unique names across -count runs, which share the package's control plane.
		iter := int(limitRuns.Add(1) - 1)
		b.StopTimer()
		ns, pool := fmt.Sprintf("limit-%d", iter), fmt.Sprintf("limit-%d", iter)
		createNamespace(b, ns)
		// 10.90.0.1-10.90.3.232: exactly 1000 addresses.
		fixtures.CreatePool(b, env.Client, fixtures.Pool(pool, fmt.Sprintf("10.%d.0.0/16", 90+iter), []string{fmt.Sprintf("10.%d.0.1-10.%d.3.232", 90+iter, 90+iter)}))
		sel := withAnnotations(annotations.IPPools, fmt.Sprintf(`[{"interface":"eth0","ipv4":[%q]}]`, pool))
		ps := make([]*corev1.Pod, pods)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 50)
		for i := range pods {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				ps[i] = createPod(b, ns, fmt.Sprintf("pod-%d", i), fmt.Sprintf("%s-node-%d", ns, i%nodes), sel)
			})
		}
		wg.Wait()
		ds := make([]*daemon.Daemon, nodes)
		for n := range nodes {
			ds[n], _ = startDaemon(b, fmt.Sprintf("%s-node-%d", ns, n))
		}
		// Every node sees its pods before the start, as a kubelet's ipamd would.
		for n, d := range ds {
			fixtures.Eventually(b, "the node's pods in its cache", func() bool {
				var list corev1.PodList
				_ = d.Cache.List(ctx, &list, client.InNamespace(ns))
				return len(list.Items) == pods/nodes
			})
			_ = n
		}
		before, err := scrapeRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, pods)
		errs := make([]error, pods)
		ownCPU := cpuSeconds()
		b.StartTimer()
		start := time.Now()
		for i := range pods {
			wg.Go(func() {
				t0 := time.Now()
				_, errs[i] = ds[i%nodes].Service.Allocate(ctx, addReq(ps[i], "eth0", fmt.Sprintf("c-%d", i)))
				lat[i] = time.Since(t0)
			})
		}
		wg.Wait()
		wall := time.Since(start)
		b.StopTimer()
		ownCPU = cpuSeconds() - ownCPU
		after, err := scrapeRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		failed := 0
		for i, e := range errs {
			if e != nil {
				failed++
				if failed <= 5 {
					b.Errorf("pod %d: %v", i, e)
				}
			}
		}
		held := records(b, pool)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		writes := after.writes - before.writes
		conflicts := after.conflicts - before.conflicts
		poolWrites := after.poolWrites - before.poolWrites
		epWrites := after.endpointWrites - before.endpointWrites
		ok := pods - failed
		b.Logf("limit test: %d pods, pool of %d, %d ipamd: wall %v, %.0f allocations/s, %.2f API writes per allocation (%d writes: %d pool status, %d endpoint, %d other; %d answered 409 Conflict), p50 %v, p99 %v, %d failed, pool records %d",
			pods, pods, nodes, wall.Round(time.Millisecond), float64(ok)/wall.Seconds(), float64(writes)/float64(ok), writes, poolWrites, epWrites, writes-poolWrites-epWrites, conflicts,
			lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), failed, len(held))
		b.Logf("API server time: pool status PUTs %.1fs in total (%.0f ms each), endpoint POSTs %.1fs in total (%.0f ms each)",
			after.poolSeconds-before.poolSeconds, 1000*(after.poolSeconds-before.poolSeconds)/float64(max(poolWrites, 1)),
			after.endpointSeconds-before.endpointSeconds, 1000*(after.endpointSeconds-before.endpointSeconds)/float64(max(epWrites, 1)))
		b.Logf("CPU: kube-apiserver %.1f s, the 10 ipamd (this process) %.1f s, during %v of wall time (machine load average %s)",
			after.cpu-before.cpu, ownCPU, wall.Round(time.Millisecond), loadAverage())
		b.Logf("time per ADD in its phases (mean, all nodes): pools %v, endpoint %v", phaseMean("pools"), phaseMean("endpoint"))
		b.ReportMetric(after.cpu-before.cpu, "apiserver-cpu-s")
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(float64(ok)/wall.Seconds(), "allocs/s")
		b.ReportMetric(float64(writes)/float64(ok), "writes/alloc")
		b.ReportMetric(float64(conflicts), "conflicts")
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
		if len(held) != pods || failed != 0 {
			b.Errorf("pool holds %d addresses, %d ADDs failed; want %d and 0", len(held), failed, pods)
		}
		checkInvariants(b, false)
	}
}

type requestCounts struct {
	writes, conflicts, poolWrites, endpointWrites int64
	// seconds the API server spent on pool PUTs and endpoint POSTs, from
	// apiserver_request_duration_seconds_sum
	poolSeconds, endpointSeconds float64
	// cpu is kube-apiserver's process_cpu_seconds_total.
	cpu float64
}

// scrapeRequests sums kube-apiserver's apiserver_request_total for mutating verbs.
func scrapeRequests(ctx context.Context) (requestCounts, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return requestCounts{}, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return requestCounts{}, fmt.Errorf("scrape kube-apiserver /metrics: %w", err)
	}
	var c requestCounts
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			c.cpu, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			continue
		}
		if strings.HasPrefix(line, "apiserver_request_duration_seconds_sum{") {
			end := strings.LastIndex(line, "}")
			lb := line[:end]
			v, _ := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
			switch {
			case label(lb, "resource") == "spiderippools" && label(lb, "verb") == "PUT":
				c.poolSeconds += v
			case label(lb, "resource") == "spiderendpoints" && label(lb, "verb") == "POST":
				c.endpointSeconds += v
			}
			continue
		}
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		labels, value := line[len("apiserver_request_total{"):end], strings.TrimSpace(line[end+1:])
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		verb, code, resource := label(labels, "verb"), label(labels, "code"), label(labels, "resource")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE":
		default:
			continue
		}
		if resource == "events" || resource == "subjectaccessreviews" || resource == "tokenreviews" {
			continue
		}
		n := int64(v)
		c.writes += n
		if code == "409" {
			c.conflicts += n
		}
		switch resource {
		case "spiderippools":
			c.poolWrites += n
		case "spiderendpoints":
			c.endpointWrites += n
		}
	}
	return c, sc.Err()
}

func label(labels, name string) string {
	labels = strings.TrimPrefix(labels[strings.Index(labels, "{")+1:], "{")
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// cpuSeconds is the CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// loadAverage tells how busy the shared machine was, to read the wall time against.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// phaseMean reads the mean of nicpool_ipamd_allocation_phase_seconds for one phase,
// over the life of this process.
func phaseMean(phase string) time.Duration {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, f := range families {
		if f.GetName() != "nicpool_ipamd_allocation_phase_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" && l.GetValue() == phase && m.GetHistogram().GetSampleCount() > 0 {
					h := m.GetHistogram()
					return time.Duration(h.GetSampleSum() / float64(h.GetSampleCount()) * float64(time.Second)).Round(time.Millisecond)
				}
			}
		}
	}
	return 0
}
