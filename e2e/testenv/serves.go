package testenv

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/nicpool/nicpool/crds/served"
)

// Serves reports whether the API server serves resource (a plural, "servicecidrs")
// of group version gv, as ipamd and the migration tell it (crds/served): what differs
// between the Kubernetes releases the tests run against (networking.k8s.io/v1
// ServiceCIDRs from 1.33 on), or a CRD a test removed.
func (e *Env) Serves(gv schema.GroupVersion, resource string) (bool, error) {
	disc, err := e.Discovery()
	if err != nil {
		return false, err
	}
	return served.Resource(disc, gv, resource)
}

// Discovery is a discovery client of the API server, for code that asks what it
// serves.
func (e *Env) Discovery() (discovery.DiscoveryInterface, error) {
	return discovery.NewDiscoveryClientForConfig(e.Config)
}
