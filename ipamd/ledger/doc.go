// Package ledger is the one writer of allocation state. Every allocation, release,
// transfer, recount and migration of address records, by ipamd and by the garbage
// collector, goes through it, with one retry policy (retry.go) and one "still held by
// this owner" rule (allocator.Owner.Holds).
//
// Records live in IPBlocks: small aligned blocks of a pool (ipamd/block). A node
// allocates inside the blocks it claimed, writing each block with a compare-and-swap
// merge patch that carries only what changed; requests for one block that queue while
// its write is in flight go out together (group commit). When its blocks are full it
// claims another with a create (AlreadyExists: another node won it); only when every
// block of the pool is claimed does it write into another node's block. A pool is
// exhausted when no block has a free address and none is left to claim.
//
// The pool's status keeps only the counts kubectl shows (allocatedIPCount,
// totalIPCount), written by Recount; records of the older layout
// (status.allocatedIPs) are moved into blocks by Migrate before anything else touches
// the pool.
package ledger
