// Package migrate moves a cluster's allocation state from spiderpool to nicpool in
// place, without re-addressing any pod. spiderpool keeps a pool's records in
// status.allocatedIPs as a JSON string, often without the interface; nicpool keeps them
// in IPBlocks, each naming its interface. The package reads spiderpool's form, places
// each record on an interface (from the pod's SpiderEndpoint, the record itself, or the
// pod's only interface), and writes the placed records through the ledger, nicpool's
// one writer of allocation state.
//
// Plan is pure and decides everything; Preflight finds what must stop or change
// first; Apply installs nicpool's CRDs over spiderpool's (same names, same stored
// objects), imports each pool's records and retires its string, pool by pool, so that
// a run that stops half way is finished by the next one.
package migrate
