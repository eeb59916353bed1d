package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// Field paths that the API server can select IPBlocks by (CRD selectableFields): an
// ipamd watches only the blocks of its node, and the writer lists one pool's blocks.
const (
	FieldPool = "spec.pool"
	FieldNode = "spec.node"
	FieldFree = "status.free"
)

// IPBlock holds the allocation records of one aligned block of a pool's addresses
// (16 addresses, or the whole subnet when it is smaller). A node claims a block by
// creating it with spec.node set to itself and allocates inside its own blocks without
// contending with other nodes; it writes into another node's block only when no block
// of the pool is left unclaimed. The block's name is derived from the pool and the
// block's first address, so two nodes claiming the same block collide on the create.
//
// The object has no status subresource: records are written with the block, as one
// compare-and-swap on resourceVersion.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ipb,categories={nicpool}
// +kubebuilder:selectablefield:JSONPath=`.spec.pool`
// +kubebuilder:selectablefield:JSONPath=`.spec.node`
// +kubebuilder:selectablefield:JSONPath=`.status.free`
// +kubebuilder:printcolumn:name="POOL",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.cidr`
// +kubebuilder:printcolumn:name="NODE",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="ALLOCATED",type=integer,JSONPath=`.status.allocated`
// +kubebuilder:printcolumn:name="FREE",type=integer,JSONPath=`.status.free`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type IPBlock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPBlockSpec   `json:"spec"`
	Status IPBlockStatus `json:"status,omitempty"`
}

// IPBlockSpec names the block's pool, its addresses and the node it belongs to.
type IPBlockSpec struct {
	// Pool is the name of the SpiderIPPool the block is part of.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="pool is immutable"
	Pool string `json:"pool"`

	// CIDR is the block's addresses, aligned on its size, inside the pool's subnet.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cidr is immutable"
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && self == string(cidr(self).masked())",message="cidr must be a canonical CIDR such as 10.6.0.16/28"
	CIDR string `json:"cidr"`

	// Node is the node that allocates from this block first; empty for a block that
	// no node claims (records carried over from an older layout). Other nodes write
	// into it only when every block of the pool is claimed.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Node string `json:"node,omitempty"`
}

// IPBlockStatus records the block's allocated addresses.
type IPBlockStatus struct {
	// Allocations maps each allocated address of the block (without prefix length) to
	// the pod interface that holds it.
	// +kubebuilder:validation:MaxProperties=256
	// +optional
	Allocations v2beta1.PoolIPAllocations `json:"allocations,omitempty"`

	// LastAllocated is the address handed out last: the next allocation takes the
	// first free address after it, so a released address is reused as late as possible.
	// +kubebuilder:validation:MaxLength=39
	// +optional
	LastAllocated string `json:"lastAllocated,omitempty"`

	// Allocated is len(allocations), for kubectl.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Allocated int64 `json:"allocated"`

	// Free is how many of the block's allocatable addresses were unallocated at the
	// last write (the pool's spec and reserved addresses as they were then). Writers
	// select blocks with room by it; exhaustion is decided on a fresh computation.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Free int64 `json:"free"`
}

// IPBlockList is a list of IPBlock.
//
// +kubebuilder:object:root=true
type IPBlockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPBlock `json:"items"`
}
