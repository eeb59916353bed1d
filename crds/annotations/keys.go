package annotations

import "k8s.io/apimachinery/pkg/util/validation/field"

// Pod annotations of the spiderpool API.
const (
	// IPPool selects pools for the pod's first interface (eth0):
	// {"ipv4":["pool"],"ipv6":["pool"],"cleangateway":false}.
	IPPool = "ipam.spidernet.io/ippool"
	// IPPools selects pools per interface:
	// [{"interface":"eth0","ipv4":["pool"],"ipv6":["pool"],"cleangateway":false}].
	// After admission every entry names its interface.
	IPPools = "ipam.spidernet.io/ippools"
	// Routes adds routes to the pod: [{"dst":"10.0.0.0/16","gw":"10.6.0.1"}]. Each route
	// belongs to the interface whose subnet contains its gw.
	Routes = "ipam.spidernet.io/routes"
)

// Namespace annotations of the spiderpool API: JSON lists of pool names used by pods of
// the namespace that name no pool.
const (
	NamespaceDefaultIPv4Pool = "ipam.spidernet.io/default-ipv4-ippool"
	NamespaceDefaultIPv6Pool = "ipam.spidernet.io/default-ipv6-ippool"
)

// Multus annotations.
const (
	// MultusNetworks lists the pod's secondary networks, as "[ns/]name[@ifname], …" or a
	// JSON list of network selection elements.
	MultusNetworks = "k8s.v1.cni.cncf.io/networks"
	// MultusNetworkStatus is written by Multus (or the node stand-in) after ADD.
	MultusNetworkStatus = "k8s.v1.cni.cncf.io/network-status"
	// MultusDefaultNetwork names the NetworkAttachmentDefinition of the pod's eth0 in
	// place of Multus's cluster network: "[namespace/]name" (a bare name is in the
	// namespace bare names read in: Multus.Namespace).
	MultusDefaultNetwork = "v1.multus-cni.io/default-network"
)

// Annotations nicpool itself writes.
const (
	// EndpointUID is stamped by the webhook on a StatefulSet pod: the metadata.uid of
	// the SpiderEndpoint the pod may take over. A node takes over no other endpoint.
	// The value "none" means no endpoint existed at admission.
	EndpointUID = "ipam.nicpool.io/endpoint-uid"
	// NoEndpoint is the EndpointUID value when no endpoint existed at admission.
	NoEndpoint = "none"
)

// DefaultInterface is the name of the cluster network interface.
const DefaultInterface = "eth0"

// Path returns the field path of a pod annotation, for errors.
func Path(key string) *field.Path {
	return field.NewPath("metadata", "annotations").Key(key)
}
