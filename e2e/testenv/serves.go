package testenv

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Serves reports whether the API server serves resource (a plural, "servicecidrs")
// of group version gv: what differs between the Kubernetes releases the tests run
// against (networking.k8s.io/v1 ServiceCIDRs from 1.33 on).
func (e *Env) Serves(gv schema.GroupVersion, resource string) (bool, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return false, err
	}
	list, err := disc.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return false, nil // the group version is not served at all
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}
