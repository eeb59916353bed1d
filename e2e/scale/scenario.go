package scale

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/nicpool/nicpool/cniplugin"
)

// Mode is how a node's runtime reaches ipamd for an ADD.
type Mode string

const (
	// Socket calls the node's ipamd socket directly, as the CNI plugin does.
	Socket Mode = "socket"
	// Exec runs the real CNI plugin binary once per ADD (and once per DEL of a failed
	// sandbox), as a container runtime does.
	Exec Mode = "exec"
)

// Scenario is one run's parameters.
type Scenario struct {
	// Name names the namespace, the pool and the nodes.
	Name string
	// Pods are spread over Nodes round-robin; each pod has one interface, eth0.
	Pods, Nodes int
	// Subnet is the pool's subnet; Size is how many of its addresses, from the first
	// host address on, the pool may allocate (0: every host address).
	Subnet netip.Prefix
	Size   int
	Mode   Mode
	// InFlight bounds the ADDs one node runs at once (0: all of its pods at once).
	// A kubelet runs at most its max-pods (110 by default) sandboxes.
	InFlight int
	// Deadline bounds the ADD phase: no attempt starts after it, and the pods
	// without an address by then are reported. 0: DeadlineFor(Pods).
	Deadline time.Duration
	// Stall ends the ADD phase early when no pod has got an address for this long
	// (0: never): a layout that cannot go on would otherwise retry every pod until
	// the deadline.
	Stall time.Duration
	// AttemptTimeout bounds one ADD or DEL: the plugin's request_timeout
	// (PluginRequestTimeout by default).
	AttemptTimeout time.Duration
	// Impatient, when set, is the first attempt's timeout instead, doubling with
	// each attempt up to AttemptTimeout: callers that give up at every stage of
	// ipamd's work, the retried ADDs and DELs of one pod overlapping in ipamd.
	Impatient time.Duration
	// DeleteAll: after the run, DEL every pod's sandbox as deleting the pods does,
	// and count what the store still holds (Result.LeftAfterDelete).
	DeleteAll bool
	// Backoff is how long a kubelet waits before it retries a pod whose sandbox
	// failed (10 s, jittered up to 50% more, in pod_workers.go).
	Backoff time.Duration
	// SampleEvery: read the API server's counters each time this many more pods
	// hold an address (0: at the start and the end only).
	SampleEvery int
}

// Defaults of a kubelet and of the plugin.
const (
	KubeletBackoff        = 10 * time.Second
	PluginRequestTimeout  = cniplugin.DefaultTimeout
	KubeletDefaultMaxPods = 110
	// KubeletRuntimeRequestTimeout is the kubelet's --runtime-request-timeout: it
	// bounds StopPodSandbox, and with it the CNI DEL of a sandbox.
	KubeletRuntimeRequestTimeout = 2 * time.Minute
	// KubeletSandboxTimeout bounds RunPodSandbox, and with it the CNI ADD: twice
	// --runtime-request-timeout (k8s.io/cri-client's RunPodSandbox).
	KubeletSandboxTimeout = 2 * KubeletRuntimeRequestTimeout
)

// DeadlineFor is the deadline of a run of pods ADDs: 5 minutes plus 20 ms per pod,
// so that a run of any size at 50 allocations per second (a fifth of the 1,000-pod
// limit test's rate on a quiet two-core machine) ends with its figures rather than
// at its deadline.
func DeadlineFor(pods int) time.Duration {
	return 5*time.Minute + time.Duration(pods)*20*time.Millisecond
}

// Range is the pool's allocatable range, first and last address inclusive.
func (s Scenario) Range() (first, last netip.Addr, err error) {
	if !s.Subnet.IsValid() || !s.Subnet.Addr().Is4() {
		return first, last, fmt.Errorf("scenario %s: subnet %v: give an IPv4 prefix such as 10.90.0.0/16", s.Name, s.Subnet)
	}
	hosts := (1 << (32 - s.Subnet.Bits())) - 2
	size := s.Size
	if size == 0 {
		size = hosts
	}
	if size < 1 || size > hosts {
		return first, last, fmt.Errorf("scenario %s: a pool of %d addresses does not fit %s (%d host addresses)", s.Name, size, s.Subnet, hosts)
	}
	first = s.Subnet.Masked().Addr().Next()
	last = first
	for range size - 1 {
		last = last.Next()
	}
	return first, last, nil
}

// PoolSize is the number of addresses the pool may allocate.
func (s Scenario) PoolSize() int {
	if s.Size == 0 && s.Subnet.IsValid() {
		return (1 << (32 - s.Subnet.Bits())) - 2
	}
	return s.Size
}

// FromEnv returns s with the parameters set in NICPOOL_SCALE_* variables (see the
// package documentation).
func (s Scenario) FromEnv() (Scenario, error) {
	ints := []struct {
		key string
		dst *int
	}{
		{"NICPOOL_SCALE_PODS", &s.Pods}, {"NICPOOL_SCALE_NODES", &s.Nodes}, {"NICPOOL_SCALE_POOL_SIZE", &s.Size},
		{"NICPOOL_SCALE_INFLIGHT", &s.InFlight}, {"NICPOOL_SCALE_SAMPLE_EVERY", &s.SampleEvery},
	}
	for _, v := range ints {
		if text, ok := os.LookupEnv(v.key); ok {
			n, err := strconv.Atoi(text)
			if err != nil || n < 0 {
				return s, fmt.Errorf("%s=%q: give a whole number, 0 or more", v.key, text)
			}
			*v.dst = n
		}
	}
	durations := []struct {
		key string
		dst *time.Duration
	}{{"NICPOOL_SCALE_DEADLINE", &s.Deadline}, {"NICPOOL_SCALE_BACKOFF", &s.Backoff}, {"NICPOOL_SCALE_STALL", &s.Stall},
		{"NICPOOL_SCALE_ATTEMPT_TIMEOUT", &s.AttemptTimeout}, {"NICPOOL_SCALE_IMPATIENT", &s.Impatient}}
	for _, v := range durations {
		if text, ok := os.LookupEnv(v.key); ok {
			d, err := time.ParseDuration(text)
			if err != nil || d < 0 {
				return s, fmt.Errorf("%s=%q: give a Go duration such as 10m", v.key, text)
			}
			*v.dst = d
		}
	}
	if text, ok := os.LookupEnv("NICPOOL_SCALE_SUBNET"); ok {
		p, err := netip.ParsePrefix(text)
		if err != nil {
			return s, fmt.Errorf("NICPOOL_SCALE_SUBNET=%q: give an IPv4 prefix such as 10.90.0.0/16", text)
		}
		s.Subnet = p
	}
	if text, ok := os.LookupEnv("NICPOOL_SCALE_MODE"); ok {
		switch m := Mode(text); m {
		case Socket, Exec:
			s.Mode = m
		default:
			return s, fmt.Errorf("NICPOOL_SCALE_MODE=%q: give socket or exec", text)
		}
	}
	if s.Deadline == 0 {
		s.Deadline = DeadlineFor(s.Pods)
	}
	return s, s.validate()
}

func (s Scenario) validate() error {
	if s.Pods < 1 || s.Nodes < 1 {
		return fmt.Errorf("scenario %s: %d pods on %d nodes: give at least one of each", s.Name, s.Pods, s.Nodes)
	}
	if s.Mode != Socket && s.Mode != Exec {
		return fmt.Errorf("scenario %s: mode %q: give socket or exec", s.Name, s.Mode)
	}
	if s.Deadline <= 0 {
		return fmt.Errorf("scenario %s: no deadline: every run is bounded", s.Name)
	}
	_, _, err := s.Range()
	return err
}

// timeout bounds a pod's attempt-th call (0 first).
func (s Scenario) timeout(attempt int) time.Duration {
	if s.Impatient <= 0 {
		return s.AttemptTimeout
	}
	t := s.Impatient << min(attempt, 30)
	if s.AttemptTimeout > 0 && (t > s.AttemptTimeout || t <= 0) {
		return s.AttemptTimeout
	}
	return t
}

// String describes the scenario in one line.
func (s Scenario) String() string {
	inflight := "all at once"
	if s.InFlight > 0 {
		inflight = fmt.Sprintf("at most %d at once per node", s.InFlight)
	}
	timeout := "caller timeout " + s.AttemptTimeout.String()
	if s.Impatient > 0 {
		timeout = fmt.Sprintf("caller timeouts from %s doubling to %s", s.Impatient, s.AttemptTimeout)
	}
	return fmt.Sprintf("%d pods, pool of %d (%s), %d ipamd, %s, ADDs %s, %s, backoff %s, deadline %s", s.Pods, s.PoolSize(), s.Subnet, s.Nodes, s.Mode, inflight, timeout, s.Backoff, s.Deadline)
}
