//go:build tools

// Package tools pins the node components of the real nodes (make up NODE=kubelet):
// kubelet and kube-proxy, and kubectl to install nicpool as a user does.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
