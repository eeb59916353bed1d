package main

import (
	"flag"
	"os"

	"github.com/nicpool/nicpool/e2e/kubelet"
)

// nodeInit is the init of a real node (kubelet mode): started by the stack inside
// the node's namespaces, never by hand.
func nodeInit(args []string) error {
	fs := flag.NewFlagSet("node-init", flag.ExitOnError)
	root := fs.String("root", "", "the node's state directory")
	hosts := fs.String("hosts", "", "file with the node's /etc/hosts")
	_ = fs.Parse(args)
	data, err := os.ReadFile(*hosts)
	if err != nil {
		return err
	}
	return kubelet.RunInit(kubelet.InitConfig{Root: *root, Hosts: string(data), Sysctls: kubelet.KernelTunables}, os.Stdin, os.Stdout)
}
