// Package scheme builds the runtime scheme every nicpool component and test speaks:
// core Kubernetes types, spiderpool.spidernet.io/v2beta1 and nicpool's own
// ipam.nicpool.io/v1alpha1, plus whatever else a caller reads.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// New returns a scheme with core Kubernetes types, nicpool's API groups and the types
// each of also adds (Multus' NetworkAttachmentDefinitions for the webhook,
// CustomResourceDefinitions for tools that install or read them).
func New(also ...func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v2beta1.AddToScheme, ipamv1alpha1.AddToScheme}, also...) {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}
