package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/ipamd/invariants"
)

// Result is what one run observed.
type Result struct {
	Scenario Scenario
	// SetUp is the time taken to write the pods and start the ipamd processes.
	SetUp time.Duration
	// Wall runs from the first ADD's start to the last pod's end (success or
	// deadline), retries included.
	Wall time.Duration
	// Stalled says the run ended early: no pod got an address for Scenario.Stall.
	Stalled bool
	// Allocated pods hold an address; FirstAttemptFailed pods needed a retry;
	// Attempts counts every ADD.
	Allocated, FirstAttemptFailed, Attempts int
	// Errors counts the failed attempts' errors by shape.
	Errors map[string]int
	// PodLatency is each allocated pod's time to its address, sorted.
	PodLatency []time.Duration
	// LastBegan is how long after the run's start the last pod's first ADD began:
	// the time the kubelets took to start every ADD.
	LastBegan  time.Duration
	Accounting Accounting
	// Invariants is the invariant checker's verdict (nil: I1–I4 hold).
	Invariants error
	// API is what the control plane counted during the ADDs; nil when its counters
	// could not be read at the end (APIUnread says why), while the rest of the run's
	// figures stand.
	API       *Counters
	APIUnread error
	// Samples are the control plane's counters as the pool filled.
	Samples []Sample
	// Largest is the largest object of nicpool's API groups at the end.
	Largest StoredObject
	// IpamdCPU and PluginCPU are CPU seconds during the ADDs: all ipamd processes,
	// all plugin execs. HarnessCPU is this process's own (the kubelets and runtimes
	// it plays, its counter reads).
	IpamdCPU, PluginCPU, HarnessCPU float64
	// PluginExecs counts the plugin runs (ADDs, and DELs of failed sandboxes).
	PluginExecs int
	// Settled is how long nicpool's objects took to stop changing after the last
	// ADD when some attempts failed (their work may go on in ipamd); Unsettled says
	// they had not stopped by the bound.
	Settled   time.Duration
	Unsettled error
	// WatchWait is how long after the counters' read the watch events the run
	// caused were still being sent (see settleWatchEvents).
	WatchWait time.Duration
	// IpamdPeakRSS is the largest resident peak of one ipamd.
	IpamdPeakRSS int64
	// WebhookCPU is the webhook's CPU seconds from the first ADD until the pool's
	// status counted every allocation (its pool counter's work, and its garbage
	// collector's reads). PoolStatusLag is how long after the last ADD that took;
	// PoolStatusBehind says it had not by poolStatusBound.
	WebhookCPU       float64
	PoolStatusLag    time.Duration
	PoolStatusBehind error
	// Load is the machine's load average at the end.
	Load string
	// Profiles says which profiles NICPOOL_SCALE_PROFILE asked for were written.
	Profiles []string
	// Undeleted counts failed sandboxes whose DEL never succeeded (held for the
	// runtime to tear down later).
	Undeleted int
	// Deleted says Scenario.DeleteAll ran: after every pod's sandbox was deleted,
	// LeftRecords and LeftEndpoints are what the store still held for the run's
	// pods (a leak), LeftExamples the first of them.
	Deleted                    bool
	LeftRecords, LeftEndpoints int
	LeftExamples               []string
}

// scrapePause is the first pause before the control plane's counters are read again
// after a failed read; each next pause is twice as long.
const scrapePause = 2 * time.Second

// watchSettleBound bounds the wait for the watch events of a run: a server that
// still sends events this long after the last ADD is not lagging but busy with
// something else, which the report would not be about.
const watchSettleBound = 15 * time.Second

// settleWatchEvents replaces after's watch-event counts with those read once they
// stop growing, and returns how long that took. The API server sends a watch event
// from its own goroutines some time after the write that caused it; a server that is
// busy may still be sending a run's events when its last ADD returns, and counting
// them then undercounts the run (measured once: 465 endpoint events for 1,000
// creates). Everything else in after stays as it was read: the wait must not add
// the idle server's CPU to the run's.
func settleWatchEvents(ctx context.Context, env *testenv.Env, after *Counters) time.Duration {
	sum := func(c *Counters) (n float64) {
		for _, v := range c.WatchEvents {
			n += v
		}
		return n
	}
	start, last := time.Now(), after
	for time.Since(start) < watchSettleBound {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-time.After(500 * time.Millisecond):
		}
		c, err := ReadCounters(ctx, env)
		if err != nil {
			break
		}
		if sum(c) == sum(last) {
			break
		}
		last = c
	}
	after.WatchEvents, after.WatchBytes = last.WatchEvents, last.WatchBytes
	return last.At.Sub(after.At)
}

// settleTimeout bounds the wait for ipamd to finish what callers gave up on.
const settleTimeout = 3 * time.Minute

// Sample is the control plane's counters when Allocated pods held an address.
type Sample struct {
	Allocated int64
	Counters  *Counters
}

// Run sets the scenario up on env's control plane, runs every ADD, and checks and
// measures the outcome. Its error is for a run that could not be made (set-up,
// scraping); what the run found is in Result.
func Run(ctx context.Context, env *testenv.Env, bins binaries.Set, s Scenario) (*Result, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	w, err := setUp(ctx, env, bins, s)
	if w != nil {
		defer w.tearDown()
	}
	if err != nil {
		return nil, fmt.Errorf("set up %s: %w", s, err)
	}
	r := &Result{Scenario: s, SetUp: time.Since(began), Errors: map[string]int{}}

	var rt runtime
	var plugin *execRuntime
	switch s.Mode {
	case Exec:
		plugin = newExecRuntime(w, bins.Plugin)
		rt = plugin
	default:
		rt = newSocketRuntime(w)
	}
	prof, err := newProfiler(env, w, s)
	if err != nil {
		return nil, err
	}
	if prof.dir != "" {
		rt = watchedRuntime{runtime: rt, p: prof}
	}
	before, err := ReadCountersRetrying(ctx, env, 3, scrapePause)
	if err != nil {
		return nil, err
	}
	cpuBefore, err := w.ipamdCPU()
	if err != nil {
		return nil, err
	}
	webhookBefore, err := w.webhookCPU()
	if err != nil {
		return nil, err
	}
	var allocated atomic.Int64
	done := make(chan struct{})
	samples := make(chan []Sample, 1)
	go func() { samples <- sample(ctx, env, s.SampleEvery, &allocated, done) }()

	harnessBefore := ownCPU()
	start := time.Now()
	prof.start(ctx)
	out, stalled := kubelets(s, w, rt, &allocated)
	r.Stalled = stalled
	r.Wall = time.Since(start)
	r.HarnessCPU = ownCPU() - harnessBefore
	close(done)
	r.Profiles = prof.wait()
	// The pool counter writes the pool's status at most once a second: the run's
	// writes include its last ones.
	r.PoolStatusLag, r.PoolStatusBehind = poolStatusCaughtUp(ctx, env, s.Name, allocated.Load())
	webhookAfter, err := w.webhookCPU()
	if err != nil {
		return nil, err
	}
	r.WebhookCPU = webhookAfter - webhookBefore

	cpuAfter, err := w.ipamdCPU()
	if err != nil {
		return nil, err
	}
	r.IpamdCPU = cpuAfter - cpuBefore
	if plugin != nil {
		r.PluginCPU, r.PluginExecs = plugin.cpuSeconds()
	}
	r.Samples = append([]Sample{{Allocated: 0, Counters: before}}, <-samples...)
	// A control plane still busy with the run may not answer at once: try for a few
	// minutes, and keep what the run found even when the counters stay unread.
	if after, err := ReadCountersRetrying(ctx, env, 6, scrapePause); err != nil {
		r.APIUnread = err
	} else {
		r.WatchWait = settleWatchEvents(ctx, env, after)
		r.API = after.Sub(before)
		r.Samples = append(r.Samples, Sample{Allocated: allocated.Load(), Counters: after})
	}
	if r.IpamdPeakRSS, err = w.peakMemory(); err != nil {
		return nil, err
	}
	if err := w.alive(); err != nil {
		return nil, fmt.Errorf("an ipamd died during the run: %w", err)
	}

	for _, o := range out {
		if !o.Began.IsZero() {
			r.LastBegan = max(r.LastBegan, o.Began.Sub(start))
		}
		r.Attempts += o.Attempts
		if o.FirstFailed {
			r.FirstAttemptFailed++
		}
		for _, e := range o.Errors {
			r.Errors[errorShape(e)]++
		}
		if o.Address != "" {
			r.Allocated++
			r.PodLatency = append(r.PodLatency, o.Latency)
		}
	}
	sort.Slice(r.PodLatency, func(i, j int) bool { return r.PodLatency[i] < r.PodLatency[j] })

	if r.Attempts > r.Allocated {
		r.Settled, r.Unsettled = settle(ctx, env, settleTimeout)
	}
	c, err := writer(env)
	if err != nil {
		return nil, err
	}
	// A control plane still busy with the run may fail a read: try a few times.
	if err := retry(ctx, func() (err error) {
		r.Accounting, err = account(ctx, c, s.Name, w.pods, out)
		return err
	}); err != nil {
		return nil, err
	}
	// Every pod of the run is alive and none was deleted: what holds at rest holds.
	r.Invariants = invariants.Check(ctx, c, invariants.Options{Converged: true})
	for _, o := range out {
		r.Undeleted += len(o.Undeleted)
	}
	if s.DeleteAll {
		if err := deleteAll(ctx, s, rt, w, out); err != nil {
			return nil, err
		}
		if _, err := settle(ctx, env, settleTimeout); err != nil {
			return nil, err
		}
		r.Deleted = true
		if err := retry(ctx, func() error { return r.left(ctx, c, s.Name) }); err != nil {
			return nil, err
		}
	}
	if r.Largest, err = largestStored(ctx, env); err != nil {
		return nil, err
	}
	r.Load = loadAverage()
	return r, nil
}

// poolStatusBound bounds the wait for the pool's status to count a run's allocations.
const poolStatusBound = 2 * time.Minute

// poolStatusCaughtUp waits until the pool's status.allocatedIPCount, which the
// webhook's pool counter writes from the IPBlocks, counts want addresses, and says
// how long that took.
func poolStatusCaughtUp(ctx context.Context, env *testenv.Env, pool string, want int64) (time.Duration, error) {
	start := time.Now()
	var got int64 = -1
	for time.Since(start) < poolStatusBound {
		p := &v2beta1.SpiderIPPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: pool}, p); err == nil && p.Status.AllocatedIPCount != nil {
			if got = *p.Status.AllocatedIPCount; got == want {
				return time.Since(start), nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return time.Since(start), fmt.Errorf("pool %s's status counted %d of %d allocations %s after the last ADD", pool, got, want, poolStatusBound)
}

// retry runs read up to 4 times, pausing 2 s, 4 s, 8 s between failures.
func retry(ctx context.Context, read func() error) error {
	pause := scrapePause
	for try := 1; ; try++ {
		err := read()
		if err == nil || try == 4 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause): // a pause for the control plane, not a synchronisation
		}
		pause *= 2
	}
}

// deleteAll deletes every pod's sandbox that got an address, as deleting the pods
// does: CNI DEL of its container, called again until it succeeds.
func deleteAll(ctx context.Context, s Scenario, rt runtime, w *world, out []outcome) error {
	s.Impatient = 0 // a pod's deletion waits as long as the runtime lets it
	var left atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, o := range out {
		if o.Container == "" {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var scratch outcome
			del(s, rt, w.pods[i], o.Container, 0, &scratch, time.Now().Add(2*time.Minute))
			if len(scratch.Undeleted) > 0 {
				left.Add(1)
			}
		})
	}
	wg.Wait()
	if n := left.Load(); n > 0 {
		return fmt.Errorf("the DEL of %d pods' sandboxes never succeeded", n)
	}
	return ctx.Err()
}

// left counts the records and endpoints of the run's namespace.
func (r *Result) left(ctx context.Context, c client.Client, namespace string) error {
	held, err := heldAddresses(ctx, c, namespace)
	if err != nil {
		return err
	}
	var eps v2beta1.SpiderEndpointList
	if err := c.List(ctx, &eps, client.InNamespace(namespace)); err != nil {
		return err
	}
	r.LeftRecords, r.LeftEndpoints, r.LeftExamples = len(held), len(eps.Items), nil
	for a, h := range held {
		if len(r.LeftExamples) < 5 {
			r.LeftExamples = append(r.LeftExamples, fmt.Sprintf("%s still held by pod %s interface %s", a, h.Pod, h.Interface))
		}
	}
	for _, ep := range eps.Items {
		if len(r.LeftExamples) < 10 {
			r.LeftExamples = append(r.LeftExamples, fmt.Sprintf("SpiderEndpoint %s/%s still there, attachments %s", ep.Namespace, ep.Name, ep.Annotations[endpoint.AttachmentsAnnotation]))
		}
	}
	return nil
}

// sample reads the control plane's counters each time every more pods hold an
// address, until done is closed.
func sample(ctx context.Context, env *testenv.Env, every int, allocated *atomic.Int64, done <-chan struct{}) []Sample {
	if every <= 0 {
		return nil
	}
	var out []Sample
	next := int64(every)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return out
		case <-tick.C:
		}
		n := allocated.Load()
		if n < next {
			continue
		}
		c, err := ReadCounters(ctx, env)
		if err != nil {
			continue // a window without this sample is wider; the run goes on
		}
		// The ADDs go on during the read: count the middle.
		out = append(out, Sample{Allocated: (n + allocated.Load()) / 2, Counters: c})
		for next <= n {
			next += int64(every)
		}
	}
}

// Window is the cost of allocating the addresses From..To of a run.
type Window struct {
	From, To int64
	// per allocation
	Writes, Bytes, WatchEvents, WatchBytes float64
	// APIServerCPU is kube-apiserver's CPU seconds per allocation.
	APIServerCPU float64
	Rate         float64 // allocations per second
}

// window computes the cost per allocation between the last sample at or below
// from and the first at or above to.
func (r *Result) window(from, to int64) (Window, error) {
	var lo, hi *Sample
	for i := range r.Samples {
		s := &r.Samples[i]
		if s.Allocated <= from {
			lo = s
		}
		if s.Allocated >= to && hi == nil {
			hi = s
		}
	}
	if lo == nil || hi == nil || hi.Allocated <= lo.Allocated {
		return Window{}, errors.New("no samples around the window")
	}
	d := hi.Counters.Sub(lo.Counters)
	n := float64(hi.Allocated - lo.Allocated)
	writes, _ := d.Writes()
	ev, evb := d.Watch()
	w := Window{From: lo.Allocated, To: hi.Allocated, Writes: writes / n, Bytes: d.BodyBytes() / n, WatchEvents: ev / n, WatchBytes: evb / n, APIServerCPU: d.APIServerCPU / n}
	if secs := hi.Counters.At.Sub(lo.Counters.At).Seconds(); secs > 0 {
		w.Rate = n / secs
	}
	return w, nil
}

// ownCPU is the CPU seconds this process has used (user and system).
func ownCPU() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}

// loadAverage tells how busy the shared machine was, to read the wall time against.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
