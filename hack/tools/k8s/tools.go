//go:build tools

// Package tools pins controller-gen in this module so `go build` uses the recorded version.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
