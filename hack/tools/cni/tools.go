//go:build tools

// Package tools pins the CNI plugins (macvlan, bridge, host-local) and the Multus thin
// plugin that the node stand-ins exec, so their versions are recorded in this go.mod.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/macvlan"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
)
