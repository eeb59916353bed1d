package manifests

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/nicpool/nicpool/manifests/externalcrds"
)

// CertManagerVersion is the cert-manager release the cert-manager overlay is
// tested against (its CRDs) and that `tilt up -- --mode=kind` installs.
const CertManagerVersion = externalcrds.CertManagerVersion

// Monitoring is the kustomization, relative to Dir, that adds monitoring beside an
// installation: Prometheus Operator targets, alerting rules, a Grafana dashboard.
const Monitoring = "overlays/monitoring"

// Kustomizations are the directories a user applies, relative to Dir: the default
// (cert-manager) and each overlay.
var Kustomizations = []string{".", "overlays/cert-manager", "overlays/self-managed"}

// Render builds the kustomization in dir (a path on disk) with the kustomize
// library, as `kubectl apply -k dir` would, and returns its objects in kustomize's
// apply order (namespaces and CRDs first, webhook configurations last).
func Render(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range res.Resources() {
		// Through JSON, so numbers are int64/float64 as everywhere in client-go.
		j, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize %s: %s: %w", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("kustomize %s: %s: %w", dir, r.CurId(), err)
		}
		out = append(out, u)
	}
	return out, nil
}
