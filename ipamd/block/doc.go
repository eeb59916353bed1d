// Package block is the pure logic of nicpool's block layout: a pool's addresses are
// split into small aligned blocks (IPBlock objects) that nodes claim, so that each
// node allocates inside its own blocks without contending with the others. It says
// which block an address belongs to, which blocks a pool can have, and how a batch of
// allocations, releases and transfers changes one block's records. It knows nothing
// of the API server.
package block
