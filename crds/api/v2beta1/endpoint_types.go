package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpiderEndpoint records the addresses of one pod, one entry per interface. It has the
// pod's namespace and name; for a StatefulSet pod it outlives the pod so that the
// recreated pod can take its addresses over. status.current.node is a selectable field:
// an ipamd watches only the endpoints of its own node.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=se,categories={spiderpool}
// +kubebuilder:selectablefield:JSONPath=`.status.current.node`
// +kubebuilder:printcolumn:name="ADDRESSES",type=string,JSONPath=`.status.current.summary`
// +kubebuilder:printcolumn:name="NODE",type=string,JSONPath=`.status.current.node`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type SpiderEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status WorkloadEndpointStatus `json:"status,omitempty"`
}

// WorkloadEndpointStatus is the pod's current allocation and its owner.
type WorkloadEndpointStatus struct {
	// Current is the allocation of the pod that holds the endpoint now.
	// +optional
	Current PodIPAllocation `json:"current,omitempty"`

	// OwnerControllerType is the kind of the pod's controller ("StatefulSet", "None", …).
	// +optional
	OwnerControllerType string `json:"ownerControllerType,omitempty"`

	// OwnerControllerName is the name of the pod's controller.
	// +optional
	OwnerControllerName string `json:"ownerControllerName,omitempty"`
}

// PodIPAllocation is the set of addresses one pod UID holds.
type PodIPAllocation struct {
	// UID is the pod's metadata.uid.
	UID string `json:"uid"`
	// Node is the node the pod runs on.
	// +optional
	Node string `json:"node,omitempty"`
	// IPs has one entry per interface.
	// +optional
	// +listType=atomic
	IPs []IPAllocationDetail `json:"ips,omitempty"`
	// Summary is every interface's addresses in one line, "eth0 10.6.0.5/16, net1
	// 10.7.0.5/24 fd00:7::5/64", written with ips by ipamd for the ADDRESSES column of
	// `kubectl get se` (the API server prints only the first element of a list in a
	// column). A copy: ips is the record. nicpool only.
	// +optional
	Summary string `json:"summary,omitempty"`
}

// IPAllocationDetail is what one interface of a pod was given.
type IPAllocationDetail struct {
	// Interface is the pod interface name; never empty.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Interface string `json:"interface"`
	// IPv4 is the IPv4 address in CIDR form (address/prefix length of the pool's subnet).
	// +optional
	IPv4 *string `json:"ipv4,omitempty"`
	// IPv6 is the IPv6 address in CIDR form.
	// +optional
	IPv6 *string `json:"ipv6,omitempty"`
	// IPv4Pool is the pool the IPv4 address came from.
	// +optional
	IPv4Pool *string `json:"ipv4Pool,omitempty"`
	// IPv6Pool is the pool the IPv6 address came from.
	// +optional
	IPv6Pool *string `json:"ipv6Pool,omitempty"`
	// Vlan is the pool's VLAN ID.
	// +optional
	Vlan *int64 `json:"vlan,omitempty"`
	// IPv4Gateway is the IPv4 pool's gateway.
	// +optional
	IPv4Gateway *string `json:"ipv4Gateway,omitempty"`
	// IPv6Gateway is the IPv6 pool's gateway.
	// +optional
	IPv6Gateway *string `json:"ipv6Gateway,omitempty"`
	// CleanGateway is true when the pod asked for no default route on this interface.
	// +optional
	CleanGateway *bool `json:"cleanGateway,omitempty"`
	// Routes are the routes handed to this interface.
	// +optional
	// +listType=atomic
	Routes []Route `json:"routes,omitempty"`
	// MAC is the interface's MAC address ("aa:bb:cc:dd:ee:ff") when a system outside
	// the IPAM provides one, as spiderpool records it; nicpool keeps it and never sets it.
	// +optional
	MAC *string `json:"mac,omitempty"`
}

// SpiderEndpointList is a list of SpiderEndpoint.
//
// +kubebuilder:object:root=true
type SpiderEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpiderEndpoint `json:"items"`
}
