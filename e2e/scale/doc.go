// Package scale is nicpool's binaries-level limit test: real nicpool-ipamd processes
// play the nodes of one real control plane, pods are bound to them, and every pod's
// CNI ADD is run at once, either at its node's ipamd socket or through one exec of the
// real CNI plugin per ADD, with the kubelet's retries. One nicpool-webhook replica runs
// the cluster controllers beside them, as a deployment does: its pool counter writes
// the pool's status (counts and spiderpool's allocatedIPs) while the pool fills, so
// its writes are among the run's. A run reports wall time,
// allocations per second, first-attempt failures, duplicates and leaks, API writes,
// bytes and watch events per allocation (from kube-apiserver's own metrics), the
// largest object stored, the CPU seconds of ipamd, the webhook, kube-apiserver and
// etcd, and how long after the last ADD the pool's status counted every allocation;
// it ends with the invariant check.
//
// The benchmarks of this package are the scenarios of `make bench`; each runs on a
// control plane of its own, one after the other:
//
//	go test -run '^$' -bench 'Limit1000/socket' -benchtime 1x -timeout 30m ./e2e/scale
//
// Parameters of whichever scenario runs can be changed from the environment:
// NICPOOL_SCALE_PODS, NICPOOL_SCALE_NODES, NICPOOL_SCALE_POOL_SIZE (addresses, 0 for
// every host address of the subnet), NICPOOL_SCALE_SUBNET, NICPOOL_SCALE_MODE (socket
// or exec), NICPOOL_SCALE_INFLIGHT (ADDs one node runs at once, 0 for all of its
// pods), NICPOOL_SCALE_DEADLINE (default 5 minutes plus 20 ms per pod),
// NICPOOL_SCALE_STALL (end early when no pod got an
// address for that long), NICPOOL_SCALE_BACKOFF, NICPOOL_SCALE_ATTEMPT_TIMEOUT (the
// caller's timeout of each ADD and DEL) and NICPOOL_SCALE_IMPATIENT (the first
// attempt's timeout, doubling per attempt) (Go durations),
// NICPOOL_SCALE_SAMPLE_EVERY (read the API server's counters each time this many more
// pods hold an address). NICPOOL_SCALE_KEEP_LOGS=1 keeps the ipamd logs (the run's
// temporary directory) after the run. NICPOOL_SCALE_PPROF=1 starts every ipamd with
// --pprof-bind-address on a loopback port and prints where once they are ready:
//
//	go tool pprof "http://ADDRESS/debug/pprof/profile?seconds=30"
//
// NICPOOL_SCALE_PROFILE=DIR writes profiles into DIR by itself: CPU profiles of
// kube-apiserver and of the first ipamd from the first ADD on (or
// NICPOOL_SCALE_PROFILE_AFTER later, a Go duration), for
// NICPOOL_SCALE_PROFILE_SECONDS (default 30), and the goroutines of any ipamd that
// left an ADD unanswered for NICPOOL_SCALE_PROFILE_SLOW (default 20s; once per ipamd).
package scale
