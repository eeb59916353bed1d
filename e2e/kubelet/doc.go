// Package kubelet runs real Kubernetes nodes on this machine without Docker: the
// kubelet, kube-proxy, containerd and runc built from source (make tools-node), each
// node in its own network, mount and PID namespaces with its own /run, /var/lib,
// /var/log and /opt, so that nicpool is installed and proven as users run it.
package kubelet
