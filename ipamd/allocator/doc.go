// Package allocator decides which addresses of a SpiderIPPool a request gets, and how a
// batch of allocations, releases and transfers changes the pool's status. It is pure
// logic: it knows ranges (crds/ipranges) and the status map, and nothing of storage,
// caches or the API server.
package allocator
