package service

import (
	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/ipamd/api"
)

// checkNetwork applies the bounds of a pod's pool selection to the network's default
// pools, before any of them is matched against the node's pools: a network
// configuration is written by whoever may create a NetworkAttachmentDefinition, and
// ipamd serves every tenant of the node.
func checkNetwork(n api.NetworkConfig) error {
	errs := annotations.ValidateNetworkDefaultPools(
		annotations.DefaultPools{Key: "ipam.default_ipv4_ippool", Names: n.DefaultIPv4Pools},
		annotations.DefaultPools{Key: "ipam.default_ipv6_ippool", Names: n.DefaultIPv6Pools})
	if len(errs) > 0 {
		return cniError(api.CodeInvalidConfig, "network "+n.Name+": "+errs.ToAggregate().Error(), nil)
	}
	return nil
}
