// Package pool admits SpiderIPPools and SpiderReservedIPs: defaulters that put a
// pool's addresses in canonical form and keep its finalizer, validators that keep
// every address allocatable by at most one pool and never take an allocated address
// away, and a controller that keeps status.totalIPCount equal to what the pool can
// hand out.
package pool
