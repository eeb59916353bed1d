package scale

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// The harness itself, small enough for every `make test`: 20 pods on 2 real ipamd
// processes through both modes fill a pool of exactly 20 to the last address, every
// pod holding what it was given, the invariants holding and the control plane's
// counters read; then, on a pool two addresses short, the two pods left over fail,
// are retried as a kubelet retries, leave nothing behind, and the run ends once
// nothing progresses; then callersGiveUp.
func TestHarness(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	ctx := context.Background()
	for i, mode := range []Mode{Socket, Exec} {
		t.Run(string(mode), func(t *testing.T) {
			s := Scenario{Name: "harness-" + string(mode), Pods: 20, Nodes: 2, Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(50 + i), 0, 0}), 24), Size: 20,
				Mode: mode, Deadline: 3 * time.Minute, AttemptTimeout: PluginRequestTimeout, Backoff: time.Second, SampleEvery: 5}
			r, err := Run(ctx, env, bins, s)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range r.Lines() {
				t.Log(l)
			}
			if r.Allocated != s.Pods || r.Accounting.Records != s.Pods {
				t.Errorf("%d pods hold an address and the store holds %d records, want %d and %d", r.Allocated, r.Accounting.Records, s.Pods, s.Pods)
			}
			if a := r.Accounting; a.Duplicates+a.Leaked+a.Mismatched != 0 {
				t.Errorf("accounting: %+v", a)
			}
			if r.Invariants != nil {
				t.Errorf("invariants: %v", r.Invariants)
			}
			if r.API == nil {
				t.Fatalf("the control plane's counters were not read: %v", r.APIUnread)
			}
			if writes, _ := r.API.Writes(); writes < float64(s.Pods) || r.API.BodyBytes() <= 0 {
				t.Errorf("the API server counted %v writes of %v bytes for %d allocations: %s", writes, r.API.BodyBytes(), s.Pods, r.API.WriteBreakdown())
			}
			if !strings.Contains(r.API.WriteBreakdown(), "spiderendpoints POST") {
				t.Errorf("no endpoint created among the writes: %s", r.API.WriteBreakdown())
			}
			if events, _ := r.API.Watch(); events < float64(s.Pods) {
				t.Errorf("%v watch events for %d allocations watched by %d ipamd: %s", events, s.Pods, s.Nodes, r.API.WatchBreakdown())
			}
			if r.IpamdCPU <= 0 || r.API.APIServerCPU <= 0 || r.API.EtcdCPU <= 0 {
				t.Errorf("CPU seconds: ipamd %v, kube-apiserver %v, etcd %v; want each above 0", r.IpamdCPU, r.API.APIServerCPU, r.API.EtcdCPU)
			}
			if (mode == Exec) != (r.PluginCPU > 0) || (mode == Exec) != (r.PluginExecs >= s.Pods) {
				t.Errorf("%d plugin runs, %v CPU-s in mode %s", r.PluginExecs, r.PluginCPU, mode)
			}
			if r.Largest.Bytes == 0 {
				t.Errorf("no object of nicpool's groups measured")
			}
			w, err := r.window(0, int64(s.Pods))
			if err != nil || w.Writes <= 0 || w.Bytes <= 0 {
				t.Errorf("cost over the whole fill: %+v, %v", w, err)
			}
		})
	}

	t.Run("exhausted", func(t *testing.T) {
		s := Scenario{Name: "harness-exhausted", Pods: 20, Nodes: 2, Subnet: netip.MustParsePrefix("10.52.0.0/24"), Size: 18,
			Mode: Socket, Deadline: 10 * time.Minute, Stall: 20 * time.Second, AttemptTimeout: PluginRequestTimeout, Backoff: 500 * time.Millisecond}
		r, err := Run(ctx, env, bins, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range r.Lines() {
			t.Log(l)
		}
		if r.Allocated != 18 || r.FirstAttemptFailed != 2 || r.Attempts < 20+2*2 {
			t.Errorf("%d allocated, %d failed first, %d attempts; want 18, 2 and the two retried at least once more", r.Allocated, r.FirstAttemptFailed, r.Attempts)
		}
		if len(r.Errors) == 0 {
			t.Error("no error recorded for the failed ADDs")
		}
		if !r.Stalled {
			t.Error("the run did not end for want of progress, though only the two pods without an address were left")
		}
		if a := r.Accounting; a.Records != 18 || a.Duplicates+a.Leaked+a.Mismatched != 0 {
			t.Errorf("accounting after failed ADDs: %+v", a)
		}
		if r.Invariants != nil {
			t.Errorf("invariants: %v", r.Invariants)
		}
	})

	t.Run("callers give up", func(t *testing.T) { callersGiveUp(t, env) })
}

// Callers that give up at every stage of ipamd's work: each pod's first ADD and DEL
// time out after a few milliseconds, the next ones after twice as long, and so on,
// so that one pod's ADDs and DELs, retried as a kubelet retries them, overlap in
// ipamd in every order, on more pods at once than ipamd works on. Once every pod has
// an address it holds exactly one, the one it was given, nothing else is held, and
// deleting every pod's sandbox frees every address and endpoint.
func callersGiveUp(t *testing.T, env *testenv.Env) {
	s := Scenario{Name: "give-up", Pods: 300, Nodes: 2, Subnet: netip.MustParsePrefix("10.53.0.0/16"), Size: 300, Mode: Socket,
		Deadline: 10 * time.Minute, AttemptTimeout: PluginRequestTimeout, Impatient: 5 * time.Millisecond, Backoff: 50 * time.Millisecond, DeleteAll: true}
	r, err := Run(context.Background(), env, bins, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range r.Lines() {
		t.Log(l)
	}
	if r.Allocated != s.Pods || r.FirstAttemptFailed == 0 {
		t.Errorf("%d of %d pods got an address, %d failed their first attempt; want all, and first attempts that gave up", r.Allocated, s.Pods, r.FirstAttemptFailed)
	}
	if a := r.Accounting; a.Records != s.Pods || a.Duplicates+a.Leaked+a.Mismatched != 0 {
		t.Errorf("accounting: %d records for %d pods, %d duplicates, %d leaked, %d pods not holding what they were given: %q",
			a.Records, s.Pods, a.Duplicates, a.Leaked, a.Mismatched, a.Examples)
	}
	if r.Invariants != nil {
		t.Errorf("invariants: %v", r.Invariants)
	}
	if r.Undeleted != 0 {
		t.Errorf("%d failed sandboxes could not be deleted", r.Undeleted)
	}
	if r.LeftRecords != 0 || r.LeftEndpoints != 0 {
		t.Errorf("after every pod's sandbox was deleted, %d addresses and %d SpiderEndpoints are still held: %q", r.LeftRecords, r.LeftEndpoints, r.LeftExamples)
	}
}

// The accounting finds each kind of problem it reports.
func TestCompare(t *testing.T) {
	pods := []Pod{{Name: "a", UID: "ua"}, {Name: "b", UID: "ub"}, {Name: "c", UID: "uc"}}
	addr := netip.MustParseAddr
	tests := []struct {
		name string
		held map[netip.Addr]holder
		out  []outcome
		want Accounting
	}{
		{"consistent", map[netip.Addr]holder{addr("10.0.0.1"): {PodUID: "ua", Interface: "eth0"}, addr("10.0.0.2"): {PodUID: "ub", Interface: "eth0"}},
			[]outcome{{Address: "10.0.0.1/24"}, {Address: "10.0.0.2/24"}, {}}, Accounting{Records: 2}},
		{"one address given twice", map[netip.Addr]holder{addr("10.0.0.1"): {PodUID: "ua", Interface: "eth0"}},
			[]outcome{{Address: "10.0.0.1/24"}, {Address: "10.0.0.1/24"}, {}}, Accounting{Records: 1, Duplicates: 1, Mismatched: 1}},
		{"a record nobody was given", map[netip.Addr]holder{addr("10.0.0.1"): {PodUID: "ua", Interface: "eth0"}, addr("10.0.0.9"): {PodUID: "uc", Interface: "eth0"}},
			[]outcome{{Address: "10.0.0.1/24"}, {}, {}}, Accounting{Records: 2, Leaked: 1}},
		{"an address the store does not hold", map[netip.Addr]holder{},
			[]outcome{{Address: "10.0.0.1/24"}, {}, {}}, Accounting{Mismatched: 1}},
		{"held under another interface", map[netip.Addr]holder{addr("10.0.0.1"): {PodUID: "ua", Interface: ""}},
			[]outcome{{Address: "10.0.0.1/24"}, {}, {}}, Accounting{Records: 1, Mismatched: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compare(tt.held, pods, tt.out)
			problems := got.Duplicates + got.Leaked + got.Mismatched
			if (len(got.Examples) == 0) != (problems == 0) {
				t.Errorf("examples %q for %d problems", got.Examples, problems)
			}
			if got.Records != tt.want.Records || got.Duplicates != tt.want.Duplicates || got.Leaked != tt.want.Leaked || got.Mismatched != tt.want.Mismatched {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A scenario refuses what it cannot run, naming the parameter.
func TestScenarioFromEnv(t *testing.T) {
	base := Scenario{Name: "s", Pods: 10, Nodes: 2, Subnet: netip.MustParsePrefix("10.9.0.0/16"), Mode: Socket, Deadline: time.Minute}
	t.Setenv("NICPOOL_SCALE_NODES", "5")
	t.Setenv("NICPOOL_SCALE_MODE", "exec")
	s, err := base.FromEnv()
	if err != nil || s.Nodes != 5 || s.Mode != Exec || s.PoolSize() != 65534 {
		t.Errorf("FromEnv: %+v, %v", s, err)
	}
	t.Run("deadline scales with the pods", func(t *testing.T) {
		t.Setenv("NICPOOL_SCALE_PODS", "65534")
		unbounded := base
		unbounded.Deadline = 0
		s, err := unbounded.FromEnv()
		if err != nil || s.Deadline != DeadlineFor(65534) || DeadlineFor(65534) <= DeadlineFor(1000) {
			t.Errorf("FromEnv without a deadline: %s, %v; want %s", s.Deadline, err, DeadlineFor(65534))
		}
	})
	for key, bad := range map[string]string{"NICPOOL_SCALE_PODS": "-1", "NICPOOL_SCALE_MODE": "fork", "NICPOOL_SCALE_SUBNET": "10.9.0.0", "NICPOOL_SCALE_DEADLINE": "5", "NICPOOL_SCALE_POOL_SIZE": "70000"} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(key, bad)
			_, err := base.FromEnv()
			if err == nil {
				err = errors.New("accepted")
			}
			if !strings.Contains(err.Error(), bad) {
				t.Errorf("%s=%s: %v, want an error quoting it", key, bad, err)
			}
		})
	}
}
