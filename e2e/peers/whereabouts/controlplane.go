// Package whereabouts runs whereabouts (github.com/k8snetworkplumbingwg/whereabouts),
// used as a library the way its CNI plugin uses it, against a real etcd and
// kube-apiserver, so that nicpool's limit test has a peer to be read against. It is a
// module of its own so that whereabouts' dependencies never reach nicpool's go.mod;
// it requires nicpool's module (replaced by this checkout) for the one test control
// plane every package starts (e2e/testenv: testenv.Main and Setup.Start).
package whereabouts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// ControlPlane is nicpool's test control plane with whereabouts' CRDs installed.
type ControlPlane struct {
	// Config reaches the API server as cluster admin.
	Config *rest.Config
	// FlatConfig is whereabouts' node-local configuration file (whereabouts.conf), as
	// its install script writes it: the datastore and the kubeconfig to use.
	FlatConfig string
}

// whereaboutsModule is the module whose CRDs are installed; its version is the one
// in this module's go.mod.
const whereaboutsModule = "github.com/k8snetworkplumbingwg/whereabouts"

// CRDFiles are whereabouts' CRD manifests, from its module in the module cache.
func CRDFiles() ([]string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", whereaboutsModule).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("locate %s in the module cache (run `go mod download` in e2e/peers/whereabouts): %w", whereaboutsModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "doc", "crds")
	var files []string
	for _, kind := range []string{"ippools", "overlappingrangeipreservations", "nodeslicepools"} {
		files = append(files, filepath.Join(dir, "whereabouts.cni.cncf.io_"+kind+".yaml"))
	}
	return files, nil
}

// CRDs are whereabouts' CustomResourceDefinitions, read from CRDFiles.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := CRDFiles()
	if err != nil {
		return nil, err
	}
	opts := envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		return nil, fmt.Errorf("read whereabouts' CRDs: %w", err)
	}
	return opts.CRDs, nil
}

// Start starts a control plane (testenv, from the repository's bin/ or
// $KUBEBUILDER_ASSETS) with whereabouts' CRDs for the tests of s, and writes
// whereabouts.conf pointing at its admin kubeconfig; s stops and removes both.
func Start(s *testenv.Setup) (*ControlPlane, error) {
	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	env, err := s.Start(testenv.Options{ExtraCRDs: crds})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "whereabouts-peer-")
	if err != nil {
		return nil, err
	}
	s.Defer(func() error { return os.RemoveAll(dir) })
	flat := filepath.Join(dir, "whereabouts.conf")
	conf := fmt.Sprintf(`{"datastore": "kubernetes", "kubernetes": {"kubeconfig": %q}}`, env.Kubeconfig)
	if err := os.WriteFile(flat, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return &ControlPlane{Config: env.Config, FlatConfig: flat}, nil
}
