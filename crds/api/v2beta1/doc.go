// Package v2beta1 holds the Go types of spiderpool's spiderpool.spidernet.io/v2beta1 API
// (SpiderIPPool, SpiderEndpoint, SpiderReservedIP, SpiderCoordinator) as nicpool serves it. JSON field names
// match spiderpool v1.x so existing manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=spiderpool.spidernet.io
package v2beta1
