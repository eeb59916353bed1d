// Package pool admits SpiderIPPools and SpiderReservedIPs: defaulters that put a
// pool's addresses in canonical form and keep its finalizer, validators that keep
// every address allocatable by at most one pool and never take an allocated address
// away. The pools' counts are webhook/controller/poolcount's.
package pool
