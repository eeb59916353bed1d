package local

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// Uplinks are the node interfaces of the two sample networks: eth0 carries the
// cluster network (the pods' eth0), eth1 the secondary network "net1" of
// examples/networks.yaml.
var Uplinks = []string{"eth0", "eth1"}

// IPAM says which IPAM plugin the networks use.
type IPAM string

const (
	// IPAMNicpool is nicpool's plugin, backed by one ipamd per node.
	IPAMNicpool IPAM = "nicpool"
	// IPAMHostLocal is the reference host-local plugin; its store is shared by all node
	// stand-ins (one host), so addresses are unique cluster-wide. It proves the local
	// cluster without nicpool.
	IPAMHostLocal IPAM = "host-local"
)

// hostLocalRanges are the ranges of examples/pools.yaml, per uplink.
var hostLocalRanges = map[string][][]map[string]string{
	"eth0": {
		{{"subnet": "10.10.0.0/24", "rangeStart": "10.10.0.10", "rangeEnd": "10.10.0.200", "gateway": "10.10.0.1"}},
		{{"subnet": "fd00:10::/64", "rangeStart": "fd00:10::10", "rangeEnd": "fd00:10::200", "gateway": "fd00:10::1"}},
	},
	"eth1": {
		{{"subnet": "10.20.0.0/24", "rangeStart": "10.20.0.10", "rangeEnd": "10.20.0.200", "gateway": "10.20.0.1"}},
		{{"subnet": "fd00:20::/64", "rangeStart": "fd00:20::10", "rangeEnd": "fd00:20::200", "gateway": "fd00:20::1"}},
	},
}

// ipamConfig is the ipam section of a network whose macvlan master is uplink.
func (s *Stack) ipamConfig(uplink string) map[string]any {
	if s.IPAM == IPAMHostLocal {
		return map[string]any{
			"type":    "host-local",
			"ranges":  hostLocalRanges[uplink],
			"dataDir": filepath.Join(s.Dir, "host-local"),
		}
	}
	// Every node's plugins see that node's own ipamd socket at the default path
	// (the node stand-in mounts the node's run directory there).
	return map[string]any{"type": "nicpool", "ipam_unix_socket_path": "/run/nicpool/ipamd.sock"}
}

// clusterNetwork is the CNI configuration of the pods' eth0.
func (s *Stack) clusterNetwork() map[string]any {
	return map[string]any{
		"cniVersion": "1.0.0",
		"name":       "cluster",
		"type":       "macvlan",
		"master":     "eth0",
		"mode":       "bridge",
		"ipam":       s.ipamConfig("eth0"),
	}
}

// adaptNetworkConfig rewrites the ipam section of a NetworkAttachmentDefinition's
// config for the IPAM in use, so examples/ can show nicpool's configuration while the
// cluster also runs without it.
func (s *Stack) adaptNetworkConfig(config string) (string, error) {
	if s.IPAM == IPAMNicpool {
		return config, nil
	}
	var conf map[string]any
	if err := json.Unmarshal([]byte(config), &conf); err != nil {
		return "", fmt.Errorf("network config: %w", err)
	}
	master, _ := conf["master"].(string)
	if _, ok := hostLocalRanges[master]; !ok {
		return config, nil
	}
	conf["ipam"] = s.ipamConfig(master)
	out, err := json.Marshal(conf)
	return string(out), err
}
