package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// goalMiB is the design's bound on each binary's resident memory.
const goalMiB = 64

var (
	env    *testenv.Env
	binDir string
)

// TestMain starts the package's one control plane and a directory for the binaries.
func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) (err error) {
		if binDir, err = os.MkdirTemp("", "nicpool-memory-bin-"); err != nil {
			return err
		}
		s.Defer(func() error { return os.RemoveAll(binDir) })
		env, err = s.Start(testenv.Options{})
		return err
	})
}

// writer is a client without client-side rate limiting, to fill the API server fast.
func writer(tb testing.TB) client.Client {
	tb.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// The harness on a small cluster: both real binaries start against the API server,
// become ready, and answer as their users see them: ipamd gives a new pod of its node
// a free address over the socket (and the pool records it), the webhook resolves a
// pod's pool annotation over TLS. Their resident memory is readable.
func TestBinariesStartAndAnswer(t *testing.T) {
	f := fixture{Name: "small", Pools: 1, PerPool: 40, Free: 10, Nodes: 2, Octet: 60}
	c := writer(t)
	populate(t, c, f)
	bins := buildBinaries(t)
	d := startIpamd(t, bins.Ipamd, env.Kubeconfig, f.node(0))
	w := startWebhook(t, bins.Webhook, env.Kubeconfig)

	if status := d.waitReady(t, f); !status.Ready {
		t.Errorf("ipamd STATUS with %d free addresses: not ready: %s", f.Free, status.Message)
	}
	if released := w.waitReady(t); released != 0 {
		t.Errorf("the webhook's garbage collector released %v addresses of live pods", released)
	}

	// ipamd: CNI ADD for a new pod on its node.
	ctx := context.Background()
	pod := f.podObject(0, f.PerPool)
	pod.Spec.NodeName = d.Node
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	sock := api.NewClient(d.Socket, 30*time.Second)
	var got *api.AllocateResponse
	err := d.WaitFor("to allocate for a new pod of its node", readyTimeout, func(ctx context.Context) error {
		r, err := sock.Allocate(ctx, &api.AllocateRequest{
			Attachment: api.Attachment{ContainerID: "harness", Interface: "eth0"},
			Pod:        api.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)},
			Network:    api.NetworkConfig{Name: "macvlan"},
		})
		got = r
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.IPs) != 1 {
		t.Fatalf("ADD answered %+v, want one address from %s", got, f.pool(0))
	}
	addr := netip.MustParsePrefix(got.IPs[0].Address).Addr()
	if addr.Less(f.address(0, f.PerPool)) || f.address(0, f.PerPool+f.Free-1).Less(addr) {
		t.Errorf("ADD gave %s, want one of the %d free addresses from %s", addr, f.Free, f.address(0, f.PerPool))
	}
	recs, err := ledger.PoolRecords(ctx, c, f.pool(0))
	if err != nil {
		t.Fatal(err)
	}
	if rec := recs[addr.String()]; rec.PodUID != string(pod.UID) || rec.Interface != "eth0" {
		t.Errorf("pool %s records %s as %+v, want pod %s eth0", f.pool(0), addr, rec, pod.UID)
	}

	// Webhook: a pod naming its pool for eth0 gets the resolved per-interface form.
	admitted := f.podObject(0, f.PerPool+1)
	delete(admitted.Annotations, annotations.IPPools)
	resp := w.admitPod(t, admitted)
	if !resp.Allowed {
		t.Fatalf("webhook refused the pod: %+v", resp.Result)
	}
	want := fmt.Sprintf(`[{"interface":"eth0","ipv4":[%q]}]`, f.pool(0))
	if v, err := patchedAnnotation(resp.Patch, annotations.IPPools); err != nil || v != want {
		t.Errorf("webhook set %s to %q (%v), want %q; patch %s", annotations.IPPools, v, err, want, resp.Patch)
	}

	for _, p := range []*binaries.Process{d.Process, w.Process} {
		m, err := p.Memory()
		if err != nil || m.RSS == 0 || m.HWM < m.RSS {
			t.Errorf("%s memory %+v: %v", p.Name, m, err)
		}
		t.Logf("%s on a near-empty cluster: VmRSS %.1f MiB (anonymous %.1f, file %.1f), VmHWM %.1f MiB", p.Name, mib(m.RSS), mib(m.Anon), mib(m.File), mib(m.HWM))
	}
}

// patchedAnnotation is the value a JSON patch gives annotation key, whether it adds
// the key alone or the whole annotations map.
func patchedAnnotation(patch []byte, key string) (string, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return "", err
	}
	escaped := "/metadata/annotations/" + jsonPointerEscape(key)
	for _, op := range ops {
		switch op.Path {
		case escaped:
			var v string
			err := json.Unmarshal(op.Value, &v)
			return v, err
		case "/metadata/annotations":
			var m map[string]string
			if err := json.Unmarshal(op.Value, &m); err != nil {
				return "", err
			}
			if v, ok := m[key]; ok {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("patch does not set annotation %s", key)
}

func jsonPointerEscape(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		switch r {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, r)
		}
	}
	return string(out)
}

// BenchmarkResidentMemory measures the design goal "ipamd and webhook resident memory
// under 64 MiB with 10 pools of 1000 allocated addresses" on the real binaries.
//
// The cluster: 10 pools of exactly 1000 addresses, all allocated; 10,000 pods with
// one interface each, each holding one address, with their 10,000 SpiderEndpoints;
// the pods spread over 10 nodes, 1000 per node, every pool spanning every node.
// ipamd runs as one of those nodes, so it caches every pool, and its node's 1000
// pods, their endpoints and its node's IPBlocks. The webhook caches every pool,
// endpoint, namespace and pod of the cluster. 1000 pods per node is far above the
// kubelet's default of 110, so the ipamd figure is an upper bound for a real node;
// the webhook's pod cache grows with the cluster's pod count, whatever the split.
//
// Then the cluster grows to 20,000 pods (10 more such pools, on 10 more nodes) and
// both are measured again: the difference is each binary's cost per additional
// 10,000 pods in a cluster that grows by nodes. NICPOOL_MEMORY_PODS adds a last size
// (e.g. 100000; writing 100,000 pods takes a while). The benchmark ends with each
// binary's figures at every size and its cost per additional 10,000 pods from 10,000
// to each larger size, at rest and at the peak.
//
// Each binary is started with the Go runtime settings (GOMEMLIMIT) its container has
// in manifests/base, waited for until ready with its caches synced (ipamd:
// /readyz and CNI STATUS listing every pool with 1000 allocated; webhook: /readyz
// and its garbage collector's first full pass over every pod), then left until its
// resident set stops moving, and read from /proc/<pid>/status: VmRSS now and VmHWM,
// the peak (the initial lists decoded at once), which is what a container memory
// limit must leave room for. The Go heap in use comes from each binary's /metrics.
func BenchmarkResidentMemory(b *testing.B) {
	bins := buildBinaries(b)
	sizes, err := memorySizes()
	if err != nil {
		b.Fatal(err)
	}
	got := map[int]map[string]binaries.Memory{}
	for _, pods := range sizes {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			f := clusterOf(b, pods)
			for b.Loop() {
				got[pods] = measure(b, bins, f)
			}
		})
	}
	for _, line := range summary(sizes, got) {
		b.Log(line)
	}
}

// summary states, for each binary, its resident memory at rest and at its peak at
// every size measured, and its cost per additional 10,000 pods from the first size
// to each larger one.
func summary(sizes []int, got map[int]map[string]binaries.Memory) []string {
	var lines []string
	for _, name := range []string{"ipamd", "webhook"} {
		first, ok := got[sizes[0]][name]
		if !ok {
			continue
		}
		for _, pods := range sizes {
			m, ok := got[pods][name]
			if !ok {
				continue
			}
			line := fmt.Sprintf("%s at %d pods: VmRSS %.1f MiB at rest, VmHWM %.1f MiB at its peak (goal: under %d MiB at 10,000 pods)", name, pods, mib(m.RSS), mib(m.HWM), goalMiB)
			if pods > sizes[0] {
				steps := float64(pods-sizes[0]) / clusterStep
				line += fmt.Sprintf("; from %d pods: %+.1f MiB at rest, %+.1f MiB at the peak per additional 10,000 pods (on other nodes than ipamd's, in 10 more pools)",
					sizes[0], (mib(m.RSS)-mib(first.RSS))/steps, (mib(m.HWM)-mib(first.HWM))/steps)
			}
			lines = append(lines, line)
		}
	}
	return lines
}

// clusterStep is what each fixture of the memory benchmark adds: 10 pools of 1000
// allocated addresses, 10,000 pods on 10 nodes of its own.
const clusterStep = 10000

// memorySizes are the cluster sizes BenchmarkResidentMemory measures: 10,000 and
// 20,000 pods, and NICPOOL_MEMORY_PODS when set (a multiple of 10,000, up to 150,000),
// e.g. 100000.
func memorySizes() ([]int, error) {
	sizes := []int{clusterStep, 2 * clusterStep}
	text, ok := os.LookupEnv("NICPOOL_MEMORY_PODS")
	if !ok {
		return sizes, nil
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < clusterStep || n%clusterStep != 0 || n > 15*clusterStep {
		return nil, fmt.Errorf("NICPOOL_MEMORY_PODS=%q: give a multiple of 10000 from 10000 to 150000", text)
	}
	if n > sizes[1] {
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// benchFixture is the design's cluster: 10 pools of 1000 allocated addresses.
var benchFixture = fixture{Name: "bench", Pools: 10, PerPool: 1000, Nodes: 10, Octet: 100}

// more is the k-th fixture after benchFixture (k from 1): the same shape, on nodes,
// pools and subnets of its own.
func more(k int) fixture {
	f := benchFixture
	f.Name, f.Octet = fmt.Sprintf("bench%d", k+1), benchFixture.Octet+k*benchFixture.Pools
	return f
}

var (
	benchMu      sync.Mutex
	benchWritten int // fixtures written so far
	benchFailed  bool
)

// benchCluster writes benchFixture once per test binary; the benchmarks share it.
func benchCluster(b *testing.B) fixture {
	b.Helper()
	return clusterOf(b, clusterStep)
}

// clusterOf grows the cluster to pods (a multiple of clusterStep) with benchFixture
// and the next fixtures, each written once per test binary, and returns
// benchFixture, whose first node ipamd runs as.
func clusterOf(b *testing.B, pods int) fixture {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if benchFailed {
		b.Fatal("the benchmark cluster could not be written (see the first failure)")
	}
	for benchWritten*clusterStep < pods {
		f := benchFixture
		if benchWritten > 0 {
			f = more(benchWritten)
		}
		began := time.Now()
		benchFailed = true // until populate returns
		populate(b, writer(b), f)
		benchFailed = false
		benchWritten++
		b.Logf("cluster: + %d pools of %d allocated addresses, %d pods on %d nodes, %d endpoints, written in %s; %d pods in all",
			f.Pools, f.PerPool, f.pods(), f.Nodes, f.pods(), time.Since(began).Round(time.Second), benchWritten*clusterStep)
	}
	return benchFixture
}

// measure starts both binaries against the cluster, waits until they are ready and
// settled, and returns each one's memory by name ("ipamd", "webhook").
func measure(b *testing.B, bins binaries.Set, f fixture) map[string]binaries.Memory {
	out := map[string]binaries.Memory{}
	began := time.Now()
	d := startIpamd(b, bins.Ipamd, env.Kubeconfig, f.node(0))
	w := startWebhook(b, bins.Webhook, env.Kubeconfig)
	d.waitReady(b, f)
	b.Logf("nicpool-ipamd ready with every pool cached after %s", time.Since(began).Round(100*time.Millisecond))
	if released := w.waitReady(b); released != 0 {
		b.Errorf("the webhook's garbage collector released %v addresses of live pods: the fixture is inconsistent", released)
	}
	b.Logf("nicpool-webhook ready, first garbage collection pass done, after %s", time.Since(began).Round(100*time.Millisecond))
	w.admitPod(b, f.podObject(0, 0)) // it serves admission with these caches

	for _, s := range []struct {
		name string
		p    *binaries.Process
		url  string
	}{
		{"ipamd", d.Process, "http://" + d.Metrics + "/metrics"},
		{"webhook", w.Process, "http://" + w.metricsAddr + "/metrics"},
	} {
		m, settled := settle(b, s.p, time.Minute)
		heap, herr := metric(context.Background(), s.url, "go_memstats_heap_inuse_bytes")
		note := ""
		if !settled {
			note = " (still moving after a minute)"
		}
		heapText := fmt.Sprintf("Go heap in use %.1f MiB", heap/(1<<20))
		if herr != nil {
			heapText = "Go heap not served: " + herr.Error()
		} else {
			b.ReportMetric(heap/(1<<20), s.name+"-heap-MiB")
		}
		b.Logf("%s (%s): VmRSS %.1f MiB%s (anonymous %.1f, file %.1f), VmHWM %.1f MiB, %s; goal: under %d MiB",
			s.p.Name, binaries.DescribeEnv(s.p.Env), mib(m.RSS), note, mib(m.Anon), mib(m.File), mib(m.HWM), heapText, goalMiB)
		b.ReportMetric(mib(m.RSS), s.name+"-rss-MiB")
		b.ReportMetric(mib(m.HWM), s.name+"-hwm-MiB")
		out[s.name] = m
	}
	d.Stop(30 * time.Second)
	w.Stop(30 * time.Second)
	return out
}
