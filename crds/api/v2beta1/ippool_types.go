package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IP families, as the value of spec.ipVersion.
const (
	IPv4 int64 = 4
	IPv6 int64 = 6
)

// PoolFinalizer keeps a SpiderIPPool in place while it still holds allocated addresses.
const PoolFinalizer = "spiderpool.spidernet.io"

// SpiderIPPool is a range of addresses that pods draw from. The pool's status is the
// source of truth for what is allocated; writes to it are compare-and-swap on the
// object's resourceVersion.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=sp,categories={spiderpool}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="VERSION",type=integer,JSONPath=`.spec.ipVersion`
// +kubebuilder:printcolumn:name="SUBNET",type=string,JSONPath=`.spec.subnet`
// +kubebuilder:printcolumn:name="ALLOCATED-IP-COUNT",type=integer,JSONPath=`.status.allocatedIPCount`
// +kubebuilder:printcolumn:name="TOTAL-IP-COUNT",type=integer,JSONPath=`.status.totalIPCount`
// +kubebuilder:printcolumn:name="DEFAULT",type=boolean,JSONPath=`.spec.default`
// +kubebuilder:printcolumn:name="DISABLE",type=boolean,JSONPath=`.spec.disable`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type SpiderIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPPoolSpec   `json:"spec,omitempty"`
	Status IPPoolStatus `json:"status,omitempty"`
}

// IPPoolSpec describes the addresses of a pool and which pods may use them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.ipVersion) || !has(oldSelf.ipVersion) || self.ipVersion == oldSelf.ipVersion",message="ipVersion is immutable"
// +kubebuilder:validation:XValidation:rule="self.subnet == oldSelf.subnet",message="subnet is immutable"
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.subnet) || self.subnet == string(cidr(self.subnet).masked())",message="subnet must be in canonical form with no host bits set, e.g. 10.6.0.0/16"
// +kubebuilder:validation:XValidation:rule="!has(self.ipVersion) || !isCIDR(self.subnet) || cidr(self.subnet).ip().family() == self.ipVersion",message="ipVersion must match the family of subnet"
type IPPoolSpec struct {
	// IPVersion is the pool's IP family, 4 or 6. Derived from subnet when omitted.
	// +kubebuilder:validation:Enum=4;6
	// +optional
	IPVersion *int64 `json:"ipVersion,omitempty"`

	// Subnet is the pool's network in canonical CIDR form, e.g. 10.6.0.0/16.
	// +kubebuilder:validation:Format=cidr
	// +kubebuilder:validation:MaxLength=43
	Subnet string `json:"subnet"`

	// IPs are the allocatable addresses: single addresses or ranges "first-last", all
	// inside subnet.
	// +optional
	// +listType=atomic
	IPs []string `json:"ips,omitempty"`

	// ExcludeIPs are addresses or ranges inside subnet that are never allocated.
	// +optional
	// +listType=atomic
	ExcludeIPs []string `json:"excludeIPs,omitempty"`

	// Gateway is the default gateway handed to pods; it is never allocated.
	// +optional
	Gateway *string `json:"gateway,omitempty"`

	// Vlan is the VLAN ID recorded for pods of this pool (0 means untagged).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4094
	// +optional
	Vlan *int64 `json:"vlan,omitempty"`

	// Routes are extra routes handed to pods of this pool.
	// +optional
	// +listType=atomic
	Routes []Route `json:"routes,omitempty"`

	// PodAffinity restricts the pool to pods whose labels match.
	// +optional
	PodAffinity *metav1.LabelSelector `json:"podAffinity,omitempty"`

	// NamespaceAffinity restricts the pool to namespaces whose labels match.
	// +optional
	NamespaceAffinity *metav1.LabelSelector `json:"namespaceAffinity,omitempty"`

	// NamespaceName restricts the pool to the named namespaces.
	// +optional
	// +listType=atomic
	NamespaceName []string `json:"namespaceName,omitempty"`

	// NodeAffinity restricts the pool to nodes whose labels match.
	// +optional
	NodeAffinity *metav1.LabelSelector `json:"nodeAffinity,omitempty"`

	// NodeName restricts the pool to the named nodes.
	// +optional
	// +listType=atomic
	NodeName []string `json:"nodeName,omitempty"`

	// MultusName restricts the pool to pods attached through these Multus networks
	// ("namespace/name" or "name").
	// +optional
	// +listType=atomic
	MultusName []string `json:"multusName,omitempty"`

	// Default marks a cluster default pool, used by pods that name no pool.
	// +optional
	Default *bool `json:"default,omitempty"`

	// Disable stops new allocations from the pool; existing ones stay.
	// +optional
	Disable *bool `json:"disable,omitempty"`
}

// Route is one route handed to a pod.
type Route struct {
	// Dst is the destination in CIDR form.
	// +kubebuilder:validation:Format=cidr
	Dst string `json:"dst"`
	// Gw is the next hop.
	// +kubebuilder:validation:MinLength=1
	Gw string `json:"gw"`
}

// IPPoolStatus is what the pool holds: its counts and, as spiderpool keeps it, the list
// of its records.
type IPPoolStatus struct {
	// AllocatedIPs is spiderpool's list of the pool's records, a JSON string of
	// {"<address>": {"pod": "<namespace>/<name>", "podUid": "<uid>"}}. nicpool keeps the
	// records in IPBlocks; its pool counter writes this string from them, at most a few
	// seconds behind, and leaves it empty for a pool with more records than a pool object
	// should carry (allocatedIPsFrom says so). A string that allocatedIPsFrom does not
	// mark as nicpool's is spiderpool's own, not migrated yet. (Unknown fields are kept
	// so that the object of records an older nicpool stored here is still read.)
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	AllocatedIPs *string `json:"allocatedIPs,omitempty"`

	// AllocatedIPCount is the number of the pool's records.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AllocatedIPCount *int64 `json:"allocatedIPCount,omitempty"`

	// TotalIPCount is the number of allocatable addresses (ips minus excludeIPs,
	// gateway and reserved addresses).
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalIPCount *int64 `json:"totalIPCount,omitempty"`

	// AllocatedIPsFrom is nicpool's, written with allocatedIPs by its pool counter:
	// "IPBlocks" when allocatedIPs lists every record of the pool's IPBlocks, or
	// "IPBlocks, omitted: <why>" when allocatedIPs is left empty. Absent while
	// allocatedIPs is spiderpool's own string.
	// +optional
	AllocatedIPsFrom string `json:"allocatedIPsFrom,omitempty"`

	// OlderLayout holds the records of a pool written by an older nicpool, which kept
	// them in status.allocatedIPs as an object; they move into blocks
	// (ipamd/ledger.Migrate). Decoded only, never written.
	OlderLayout PoolIPAllocations `json:"-"`

	// Unreadable says why the stored status could not be decoded; the rest of the
	// status is then empty. The pool serves nothing until its status is repaired, and
	// no other pool is affected.
	Unreadable string `json:"-"`
}

// PoolIPAllocations maps an address to the pod interface that holds it.
type PoolIPAllocations map[string]PoolIPAllocation

// PoolIPAllocation names the pod interface that holds an address.
type PoolIPAllocation struct {
	// Pod is "namespace/name" of the holder.
	// +kubebuilder:validation:MinLength=1
	Pod string `json:"pod"`
	// PodUID is the holder's metadata.uid.
	// +kubebuilder:validation:MinLength=1
	PodUID string `json:"podUid"`
	// Interface is the pod interface (CNI_IFNAME) the address is on; never empty.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Interface string `json:"interface"`
}

// SpiderIPPoolList is a list of SpiderIPPool.
//
// +kubebuilder:object:root=true
type SpiderIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpiderIPPool `json:"items"`
}
