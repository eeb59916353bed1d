// Command nicpool is the CNI IPAM plugin (type "nicpool"): the container runtime execs
// it for every CNI verb and it forwards the request to the node's ipamd.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/nicpool/nicpool/cniplugin"
)

func main() {
	skel.PluginMainFuncs(cniplugin.Funcs(), cniplugin.SupportedVersions, "nicpool CNI IPAM plugin (forwards to ipamd; see https://github.com/nicpool/nicpool)")
}
