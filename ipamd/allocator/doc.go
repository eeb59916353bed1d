// Package allocator holds what a SpiderIPPool can hand out (Range: its allocatable
// addresses, allocation order, and whether it hands out anything new), the ops a
// request asks of a pool (Op: allocate, release, transfer) and the one ownership rule
// (Owner.Holds). ipamd/block applies the ops to a block's records. It is pure logic:
// it knows ranges (crds/ipranges) and records, and nothing of storage, caches or the
// API server.
package allocator
