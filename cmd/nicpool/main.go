// Command nicpool is the CNI IPAM plugin (type "nicpool"): the container runtime execs
// it for every CNI verb and it forwards the request to the node's ipamd. Run as
// `nicpool install --dir=DIR`, it copies itself into a node's CNI bin directory (the
// ipamd DaemonSet's init container; runtimes never pass arguments to a plugin).
package main

import (
	"os"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/cniplugin/install"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "install" {
		os.Exit(install.Main(os.Args[2:], os.Stderr))
	}
	cniplugin.Main(cniplugin.PluginFuncs(), cniplugin.SupportedVersions, "nicpool CNI IPAM plugin (forwards to ipamd; see https://github.com/nicpool/nicpool)")
}
