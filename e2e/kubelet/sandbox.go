package kubelet

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cniCacheEntry is the part of a libcni result cache file that names the pod and
// its network namespace.
type cniCacheEntry struct {
	ContainerID string      `json:"containerId"`
	IfName      string      `json:"ifName"`
	NetNS       string      `json:"netns"`
	CniArgs     [][2]string `json:"cniArgs"`
}

// Sandbox finds the network namespace of a pod running on this node, from the result
// cache the runtime's CNI library keeps (/var/lib/cni/results): a path through the
// node's init, in whose mount namespace the runtime pinned the namespace.
func (n *Node) Sandbox(namespace, name string) (string, bool) {
	files, _ := filepath.Glob(filepath.Join(n.cfg.Root, "var/lib/cni/results", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var e cniCacheEntry
		if json.Unmarshal(data, &e) != nil || e.IfName != "eth0" || e.NetNS == "" {
			continue
		}
		args := map[string]string{}
		for _, kv := range e.CniArgs {
			args[kv[0]] = kv[1]
		}
		if args["K8S_POD_NAMESPACE"] != namespace || args["K8S_POD_NAME"] != name {
			continue
		}
		// /var/run is a symbolic link to /run, which would resolve on the host.
		netns := strings.TrimPrefix(e.NetNS, "/var")
		path := filepath.Join(fmt.Sprintf("/proc/%d/root", n.initPid()), netns)
		if _, err := os.Stat(path); err == nil {
			return path, true
		}
	}
	return "", false
}
