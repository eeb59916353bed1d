// Package store is the layout nicpool used before IPBlocks: every record in the
// SpiderIPPool's status, written with a compare-and-swap on the pool's resourceVersion
// and group commit. No binary uses it any more (ipamd/ledger is the one writer of
// allocation state); it stays as the baseline ipamd/ledger's BenchmarkLayouts measures
// the block layout against.
package store
