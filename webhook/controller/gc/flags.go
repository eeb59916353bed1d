package gc

import (
	"flag"
)

// BindFlags registers the collector's options as command-line flags with the defaults
// filled in, for cmd/nicpool-webhook (pflag users: AddGoFlagSet).
func (o *Options) BindFlags(fs *flag.FlagSet) {
	*o = o.withDefaults()
	fs.DurationVar(&o.Interval, "gc-interval", o.Interval,
		"interval between full garbage collection passes")
	fs.DurationVar(o.MinAge, "gc-min-age", *o.MinAge,
		"how long an address must be seen without its pod before the garbage collector releases it (0: at once, after the live check)")
	fs.DurationVar(o.TerminatingGrace, "gc-terminating-grace", *o.TerminatingGrace,
		"how long a terminating pod keeps its addresses after its deletionTimestamp (0: none)")
	fs.BoolVar(&o.KeepTerminating, "gc-keep-terminating", o.KeepTerminating,
		"never release the addresses of a pod that still exists, however long it has been terminating")
	fs.BoolVar(&o.ReleaseOnNotReadyNode, "gc-release-on-not-ready-node", o.ReleaseOnNotReadyNode,
		"release a terminating pod's addresses at the end of its grace even while its node is not Ready (default: keep them until the pod object is gone, as the node may be partitioned and still run the pod)")
	fs.DurationVar(&o.Debounce, "gc-debounce", o.Debounce,
		"delay between a pod or StatefulSet event and the pass it triggers")
}
