// Package integration proves the nicpool plugin the way container runtimes use it:
// its tests build the binary and run it through libcni under the real macvlan plugin,
// in a network namespace per pod, against a real ipamd and kube-apiserver.
//
// It holds tests only.
package integration
