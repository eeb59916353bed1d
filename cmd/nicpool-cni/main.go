// Command nicpool-cni is the Go CNI IPAM plugin (type "nicpool"). Runtimes exec its
// front, the small C program installed as nicpool and spiderpool (cniplugin/front),
// which hands each call to ipamd over its socket and execs nicpool-cni, installed
// beside it, for whatever it does not serve itself: nicpool-cni then does what ipamd
// does not (opens log_file_path, parses a configuration of any size, reaches another
// socket) and sends the node's ipamd the call as the front does, in a frame, with the
// configuration trimmed to what the verb reads. Run as `nicpool-cni install --dir=DIR
// NAME...`, it copies itself and the front shipped beside it into a node's CNI bin
// directory (the ipamd DaemonSet's init container; runtimes never pass arguments to a
// plugin).
package main

import (
	"fmt"
	"os"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/cniplugin/install"
	"github.com/nicpool/nicpool/version"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(version.Line("nicpool-cni"))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "install" {
		os.Exit(install.Main(os.Args[2:], os.Stderr))
	}
	cniplugin.Main("nicpool CNI IPAM plugin " + version.Get().Version + " (forwards to ipamd; see https://github.com/nicpool/nicpool)")
}
