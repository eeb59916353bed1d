//go:build tools

// Package tools pins runc, the OCI runtime the real nodes' containerd starts
// containers with (built with cgo and seccomp by hack/tools/build.sh).
package tools

import _ "github.com/opencontainers/runc"
