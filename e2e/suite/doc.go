// Package suite is nicpool's end-to-end Ginkgo suite: it brings up the whole local
// stack once (control plane, controllers, scheduler, node stand-ins running Multus,
// macvlan and nicpool's plugin, ipamd per node, the webhook) and drives it as a user
// does, through the API server. Every spec ends with the invariant check.
package suite
