// Package fabric wires the node stand-ins of the local cluster together: one network
// namespace per node, one per pod, and a "fabric" namespace whose bridges join every
// node's uplinks, so macvlan pods on different nodes share an L2 segment per network.
// Every namespace it creates is named after the creating process
// (nicpool-e2e-<pid>-…), so Sweep can remove what a crashed run left behind.
package fabric
