package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every type in this package.
var GroupVersion = schema.GroupVersion{Group: "spiderpool.spidernet.io", Version: "v2beta1"}

var (
	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind names, for events, errors and GVKs.
const (
	KindSpiderIPPool      = "SpiderIPPool"
	KindSpiderEndpoint    = "SpiderEndpoint"
	KindSpiderReservedIP  = "SpiderReservedIP"
	KindSpiderCoordinator = "SpiderCoordinator"
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&SpiderIPPool{}, &SpiderIPPoolList{},
		&SpiderEndpoint{}, &SpiderEndpointList{},
		&SpiderReservedIP{}, &SpiderReservedIPList{},
		&SpiderCoordinator{}, &SpiderCoordinatorList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
