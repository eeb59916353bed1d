// Package gc is nicpool's garbage collector: it releases the pool addresses and
// SpiderEndpoints of pods that are gone, finished, terminating past their grace period,
// or StatefulSet ordinals scaled away, and never those of a live pod or of a StatefulSet
// pod that will come back. It also holds SpiderIPPool's finalizer until the pool is empty.
//
// The decision (Decide) is a pure function of a snapshot of pods, StatefulSets, pools
// and endpoints; Collector adds the I/O around it: it reads the snapshot from the
// manager's cache, confirms every decision that rests on a pod's absence with a live
// read, and releases with compare-and-swap writes. SetupWithManager registers the
// collector and the pool finalizer as leader-elected controllers; RunOnce forces one
// full pass for tests and benchmarks.
package gc
