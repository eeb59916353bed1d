// Package store writes allocations into SpiderIPPool status against the API server.
// Every write is a compare-and-swap on the pool's resourceVersion; requests for one
// pool that queue while a write is in flight go out together in the next write (group
// commit), and a 409 Conflict re-reads the pool once and retries what is still pending.
// It knows storage and nothing of ranges: which address to take is the allocator's job.
package store
