package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpiderReservedIP lists addresses that no pool may hand out.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=sr,categories={spiderpool}
// +kubebuilder:printcolumn:name="VERSION",type=integer,JSONPath=`.spec.ipVersion`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type SpiderReservedIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ReservedIPSpec `json:"spec,omitempty"`
}

// ReservedIPSpec is the reserved addresses of one family.
type ReservedIPSpec struct {
	// IPVersion is 4 or 6; derived from ips when omitted.
	// +kubebuilder:validation:Enum=4;6
	// +optional
	IPVersion *int64 `json:"ipVersion,omitempty"`
	// IPs are addresses or "first-last" ranges.
	// +optional
	// +listType=atomic
	IPs []string `json:"ips,omitempty"`
}

// SpiderReservedIPList is a list of SpiderReservedIP.
//
// +kubebuilder:object:root=true
type SpiderReservedIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpiderReservedIP `json:"items"`
}
