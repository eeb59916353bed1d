//go:build tools

// Package tools pins containerd and its client ctr, the container runtime of the
// real nodes (make up NODE=kubelet).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
