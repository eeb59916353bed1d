// Package local runs nicpool on this machine without Docker: the control plane built
// into bin/, nicpool's CRDs and the sample objects of examples/. It backs `make run`.
package local
