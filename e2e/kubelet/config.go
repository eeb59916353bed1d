package kubelet

import (
	"encoding/base64"
	"fmt"
)

// PauseImage is the sandbox image of every node (built locally, imported).
const PauseImage = "registry.k8s.io/pause:3.10"

// registryHostsDir is where the node's containerd finds a hosts.toml per registry
// host (containerd's docs/hosts.md): Config.Registries'.
const registryHostsDir = "/etc/containerd/certs.d"

// containerdConfig is containerd's configuration: default paths (they are the node's
// own), the CRI plugin with CNI from the node's /opt/cni/bin and /etc/cni/net.d, and
// the registry hosts of registryHostsDir.
func (n *Node) containerdConfig() []byte {
	return fmt.Appendf(nil, `version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins.'io.containerd.cri.v1.images']
  # Images are imported; the only registries reachable are Config.Registries, each
  # with its hosts.toml here.
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %q
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q

[plugins.'io.containerd.cri.v1.runtime']
  # Without CAP_SYS_RESOURCE runc cannot lower a container's oom_score_adj below
  # its own; containers keep at least containerd's.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/opt/cni/bin"]
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
`, registryHostsDir, PauseImage)
}

// registryHosts is the hosts.toml of a registry served over plain HTTP at host
// (host:port): containerd resolves and pulls its images there, without TLS.
func registryHosts(host string) []byte {
	return fmt.Appendf(nil, `server = "http://%s"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, host, host)
}

// kubeletConfig is the kubelet's configuration, set for a node that shares the
// machine: cgroupfs without per-QoS cgroups (pods go under CgroupRoot), no
// eviction or image garbage collection triggered by the machine's disk, and the
// cgroup v1 hierarchy this kind of host has.
func (n *Node) kubeletConfig() []byte {
	return fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# The node is reachable only on the test fabric; the API server reaches it (logs,
# exec) without a client certificate.
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
cgroupRoot: %s
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
maxPods: 250
# Quick enough that a stopped kubelet shows as NotReady within seconds.
nodeLeaseDurationSeconds: 8
nodeStatusUpdateFrequency: 2s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
`, n.cfg.Address.Addr(), n.cfg.CgroupRoot)
}

// KubeProxyConfig gives ClusterIP Services with nftables in the network namespace
// kube-proxy runs in; it leaves the host's conntrack sysctls alone.
func KubeProxyConfig(kubeconfig, hostname, bindAddress string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: nftables
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Pods reach Services through a router (macvlan bypasses the node's stack): answers
# must come back the same way.
masqueradeAll: true
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, hostname, bindAddress)
}

// Kubeconfig authenticates to the API server at server (host:port) with a client
// certificate; the server's certificate names localhost.
func Kubeconfig(server string, ca, cert, key []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://%s
    tls-server-name: localhost
    certificate-authority-data: %s
users:
- name: user
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: local
  context: {cluster: local, user: user}
current-context: local
`, server, b64(ca), b64(cert), b64(key))
}

// KernelTunables are the kernel settings the kubelet insists on (it writes them when
// they differ). They are not namespaced, so the node's init shows the kubelet these
// values instead of letting it change the host's.
var KernelTunables = map[string]string{
	"vm/overcommit_memory": "1",
	"kernel/panic":         "10",
	"kernel/panic_on_oops": "1",
}
