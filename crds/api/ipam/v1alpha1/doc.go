// Package v1alpha1 holds nicpool's own storage API, ipam.nicpool.io/v1alpha1: IPBlock,
// the allocation records of one small aligned block of a SpiderIPPool. spiderpool has
// no such type; the spiderpool-visible surface stays SpiderIPPool's counts and
// SpiderEndpoint.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.nicpool.io
package v1alpha1
