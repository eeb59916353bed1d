// Package served tells whether the API server serves a kind, by discovery: a kind
// whose CRD is not installed, or that the cluster's Kubernetes release predates
// (networking.k8s.io/v1 ServiceCIDRs before 1.33), is not served. ipamd starts the
// caches of the kinds served alone (a cache of another would never sync), and the
// migration from spiderpool says what ipamd would then refuse: both ask here, so that
// they never disagree on it.
package served

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Resource reports whether the API server serves resource (a plural,
// "spidercoordinators") of group version gv. A group version the API server does not
// serve at all is no error: it serves nothing of it.
func Resource(disc discovery.ServerResourcesInterface, gv schema.GroupVersion, resource string) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}
