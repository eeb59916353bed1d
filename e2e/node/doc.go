// Package node is the node stand-in of the local cluster: it registers a Ready Node
// and plays only the kubelet's network role. For every pod bound to it, it creates a
// network namespace and runs CNI ADD through libcni with the real Multus thin plugin,
// then reports the pod Running with its addresses; when the pod goes, it runs CNI DEL
// and finishes the deletion.
package node
