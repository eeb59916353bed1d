// Package externalcrds provides the CustomResourceDefinitions of the APIs that
// nicpool's manifests and chart use besides its own: cert-manager's (the cert-manager
// mode) and the Prometheus Operator's (monitoring), at the versions they are tested
// against, so that tests can install them on a real API server. Both come through the
// Go module proxy like any dependency.
package externalcrds

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	// CertManagerVersion is the cert-manager release the cert-manager mode is tested
	// against (its CRDs) and that `tilt up -- --mode=kind` installs.
	CertManagerVersion = "v1.21.2"
	// PrometheusOperatorVersion is the Prometheus Operator release whose API
	// (monitoring.coreos.com/v1) the monitoring objects are tested against.
	PrometheusOperatorVersion = "v0.95.2"
)

// CertManager reads the CRD YAML cert-manager ships in its module (deploy/crds).
func CertManager() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := moduleDir("github.com/cert-manager/cert-manager@" + CertManagerVersion)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "deploy", "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRD YAML in %s/deploy/crds", dir)
	}
	return read(files)
}

// PrometheusOperator generates the ServiceMonitor, PodMonitor and PrometheusRule CRDs
// from the Prometheus Operator's API module with controller-gen (the binary at
// controllerGen), as the Prometheus Operator generates them.
func PrometheusOperator(controllerGen string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := moduleDir("github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@" + PrometheusOperatorVersion)
	if err != nil {
		return nil, err
	}
	out, err := os.MkdirTemp("", "nicpool-monitoring-crds-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	cmd := exec.Command(controllerGen, "crd:maxDescLen=0", "paths=./v1/...", "output:crd:dir="+out)
	cmd.Dir = dir
	// The module cache is read-only; its go.sum is complete, so nothing is written.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("controller-gen in %s: %w\n%s", dir, err, b)
	}
	var files []string
	for _, kind := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		files = append(files, filepath.Join(out, "monitoring.coreos.com_"+kind+".yaml"))
	}
	return read(files)
}

func read(files []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// moduleDir downloads a module at an exact version through the Go module proxy and
// returns its directory in the module cache.
func moduleDir(module string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %q", module, mod.Error)
	}
	return mod.Dir, nil
}
