package local

// Uplinks are the node interfaces of the two sample networks: eth0 carries the
// cluster network (the pods' eth0), eth1 the secondary network "net1" of
// examples/networks.yaml.
var Uplinks = []string{"eth0", "eth1"}

// clusterNetwork is the CNI configuration of the pods' eth0. Every node's plugins see
// that node's own ipamd socket at the default path (the node stand-in mounts the
// node's run directory there).
func (s *Stack) clusterNetwork() map[string]any {
	return map[string]any{
		"cniVersion": "1.0.0",
		"name":       "cluster",
		"type":       "macvlan",
		"master":     "eth0",
		"mode":       "bridge",
		"ipam":       map[string]any{"type": "nicpool", "ipam_unix_socket_path": "/run/nicpool/ipamd.sock"},
	}
}
