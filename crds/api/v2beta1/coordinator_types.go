package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpiderCoordinator configures spiderpool's coordinator CNI plugin, which asks the
// node for it on every call (GET /v1/coordinator/config on the socket spiderpool's
// agent served; nicpool's ipamd answers it there). The schema accepts what
// spiderpool's accepts; what ipamd serves from it, and what it refuses, is
// ipamd/coordinator's.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=scc,categories={spiderpool}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MODE",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="PODCIDRTYPE",type=string,JSONPath=`.spec.podCIDRType`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type SpiderCoordinator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CoordinatorSpec   `json:"spec,omitempty"`
	Status CoordinatorStatus `json:"status,omitempty"`
}

// Coordinator modes, the values of spec.mode.
const (
	CoordinatorModeAuto     = "auto"
	CoordinatorModeUnderlay = "underlay"
	CoordinatorModeOverlay  = "overlay"
	CoordinatorModeDisabled = "disabled"
)

// Where the pod CIDRs come from, the values of spec.podCIDRType.
const (
	PodCIDRTypeAuto    = "auto"
	PodCIDRTypeCluster = "cluster"
	PodCIDRTypeCalico  = "calico"
	PodCIDRTypeCilium  = "cilium"
	PodCIDRTypeNone    = "none"
)

// Bounds of a SpiderCoordinator's lists: every coordinator call of every node is
// answered from them.
const (
	MaxCoordinatorCIDRs  = 64
	MaxCoordinatorRoutes = 64
)

// CoordinatorSpec is what coordinator does in a pod. Defaults are spiderpool's.
type CoordinatorSpec struct {
	// Mode is how coordinator works: underlay (a veth to the node beside an underlay
	// eth0), overlay (beside an overlay eth0), auto (chosen per pod), disabled.
	// +kubebuilder:validation:Enum=auto;underlay;overlay;disabled
	// +kubebuilder:default=auto
	// +optional
	Mode *string `json:"mode,omitempty"`

	// PodCIDRType says where the cluster's pod CIDRs come from. nicpool serves none;
	// for the others, list the pod CIDRs in hijackCIDR (see
	// docs/migrate-from-spiderpool.md).
	// +kubebuilder:validation:Enum=auto;cluster;calico;cilium;none
	// +optional
	PodCIDRType *string `json:"podCIDRType,omitempty"`

	// HijackCIDR are destinations (CIDRs or addresses) the pod reaches through the
	// node, such as NodeLocal DNS's 169.254.0.0/16.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	// +optional
	HijackCIDR []string `json:"hijackCIDR,omitempty"`

	// PolicyRoutes are routes coordinator adds to the policy routing table of the
	// interface it runs for.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	PolicyRoutes []CoordinatorRoute `json:"policyRoutes,omitempty"`

	// PodMACPrefix is the first two bytes of every pod MAC address coordinator sets,
	// e.g. 0a:1b (a unicast prefix: the lowest bit of the first byte is 0).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	PodMACPrefix *string `json:"podMACPrefix,omitempty"`

	// TunePodRoutes moves the routes of a pod's other interfaces into policy routing
	// tables, keeping the default route on one interface.
	// +kubebuilder:default=true
	// +optional
	TunePodRoutes *bool `json:"tunePodRoutes,omitempty"`

	// PodDefaultRouteNIC is the interface that keeps the pod's default route (empty:
	// eth0). A pod's ipam.spidernet.io/default-route-nic annotation overrides it.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	PodDefaultRouteNIC *string `json:"podDefaultRouteNIC,omitempty"`

	// HostRuleTable is the node's routing table for routes to its pods.
	// +kubebuilder:default=500
	// +optional
	HostRuleTable *int `json:"hostRuleTable,omitempty"`

	// PodRPFilter is the pod's rp_filter: 0, 1 or 2; negative leaves it as it is.
	// +kubebuilder:default=0
	// +optional
	PodRPFilter *int `json:"podRPFilter,omitempty"`

	// TxQueueLen is the pod interface's transmit queue length; 0 leaves it as it is.
	// +kubebuilder:default=0
	// +optional
	TxQueueLen *int `json:"txQueueLen,omitempty"`

	// VethLinkAddress is an IPv4 link-local address given to the pod's veth0 (empty:
	// none), e.g. 169.254.100.1.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	VethLinkAddress *string `json:"vethLinkAddress,omitempty"`

	// VethMTU is the MTU of veth0.
	// +kubebuilder:validation:Minimum=1
	// +optional
	VethMTU *int `json:"vethMTU,omitempty"`
}

// CoordinatorRoute is one policy route.
type CoordinatorRoute struct {
	// Dst is the destination, a CIDR or an address.
	// +kubebuilder:validation:MaxLength=64
	Dst string `json:"dst"`
	// Gw is the next hop, of dst's family.
	// +kubebuilder:validation:MaxLength=64
	Gw string `json:"gw"`
}

// CoordinatorStatus is what spiderpool's controller detected. nicpool neither reads
// nor writes it: ipamd computes what it serves from the spec and the cluster.
type CoordinatorStatus struct {
	// Phase is spiderpool's Synced or NotReady.
	Phase string `json:"phase"`
	// Reason says why the phase is NotReady.
	// +optional
	Reason string `json:"reason,omitempty"`
	// OverlayPodCIDR are the pod CIDRs spiderpool detected.
	// +listType=atomic
	// +optional
	OverlayPodCIDR []string `json:"overlayPodCIDR,omitempty"`
	// ServiceCIDR are the Service CIDRs spiderpool detected.
	// +listType=atomic
	// +optional
	ServiceCIDR []string `json:"serviceCIDR,omitempty"`
}

// SpiderCoordinatorList is a list of SpiderCoordinator.
//
// +kubebuilder:object:root=true
type SpiderCoordinatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpiderCoordinator `json:"items"`
}
