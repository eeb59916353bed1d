// Package cluster runs a local Kubernetes control plane for nicpool's end-to-end
// tests: etcd and kube-apiserver from e2e/testenv, plus the real
// kube-controller-manager and kube-scheduler from bin/. It owns the processes it starts
// and stops them even after a failed run.
package cluster
