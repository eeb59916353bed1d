package coordinator

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/discovery"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/served"
)

// CRD is the CustomResourceDefinition of SpiderCoordinators, which nicpool's CRDs
// include (with spiderpool's schema and defaults).
const CRD = "spidercoordinators.spiderpool.spidernet.io"

// NoCRD says that the API server serves no SpiderCoordinator, for ipamd's refusal and
// the migration's blocker alike; each adds the fix that is its reader's.
const NoCRD = "the API server serves no SpiderCoordinator: its CRD " + CRD + " is not installed"

// Served is which of the kinds the answer reads the API server serves: without
// SpiderCoordinators there is nothing to answer from, without ServiceCIDRs
// (Kubernetes 1.33 and later) no Service CIDRs to route.
type Served struct {
	SpiderCoordinators, ServiceCIDRs bool
}

// Discover asks the API server which of the kinds the answer reads it serves.
func Discover(disc discovery.ServerResourcesInterface) (Served, error) {
	var s Served
	var err error
	if s.SpiderCoordinators, err = served.Resource(disc, v2beta1.GroupVersion, "spidercoordinators"); err != nil {
		return Served{}, err
	}
	if s.ServiceCIDRs, err = served.Resource(disc, networkingv1.SchemeGroupVersion, "servicecidrs"); err != nil {
		return Served{}, err
	}
	return s, nil
}
