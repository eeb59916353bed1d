// Package whereabouts runs whereabouts (github.com/k8snetworkplumbingwg/whereabouts),
// used as a library the way its CNI plugin uses it, against a real etcd and
// kube-apiserver, so that nicpool's limit test has a peer to be read against. It is a
// module of its own so that whereabouts' dependencies never reach nicpool's go.mod.
package whereabouts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a running etcd and kube-apiserver with whereabouts' CRDs installed.
type ControlPlane struct {
	// Config reaches the API server as cluster admin.
	Config *rest.Config
	// FlatConfig is whereabouts' node-local configuration file (whereabouts.conf), as
	// its install script writes it: the datastore and the kubeconfig to use.
	FlatConfig string

	env *envtest.Environment
	dir string
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

// BinDir is where etcd and kube-apiserver are: $KUBEBUILDER_ASSETS when set, else the
// repository's bin/ (this module lives in e2e/peers/whereabouts).
func BinDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	return filepath.Abs(filepath.Join("..", "..", "..", "bin"))
}

// Start brings up etcd and kube-apiserver from the repository's bin/ on free ports
// and installs whereabouts' CRDs.
func Start() (*ControlPlane, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s missing in %s (set KUBEBUILDER_ASSETS or run `make tools` at the repository root): %w", name, bin, err)
		}
	}
	crds, err := CRDFiles()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDInstallOptions:        envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true},
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start control plane from %s: %w", bin, err)
	}
	cp := &ControlPlane{Config: cfg, env: env}
	if err := cp.writeFlatConfig(); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

// writeFlatConfig writes an admin kubeconfig and whereabouts.conf pointing at it,
// which whereabouts' config loader requires to find.
func (cp *ControlPlane) writeFlatConfig() error {
	dir, err := os.MkdirTemp("", "whereabouts-peer-")
	if err != nil {
		return err
	}
	cp.dir = dir
	user, err := cp.env.AddUser(envtest.User{Name: "whereabouts", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add whereabouts user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("whereabouts kubeconfig: %w", err)
	}
	kubeconfig := filepath.Join(dir, "whereabouts.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	cp.FlatConfig = filepath.Join(dir, "whereabouts.conf")
	flat := fmt.Sprintf(`{"datastore": "kubernetes", "kubernetes": {"kubeconfig": %q}}`, kubeconfig)
	return os.WriteFile(cp.FlatConfig, []byte(flat), 0o600)
}

// Stop stops kube-apiserver and etcd and removes the files Start wrote.
func (cp *ControlPlane) Stop() error {
	err := cp.env.Stop()
	if cp.dir != "" {
		err = errors.Join(err, os.RemoveAll(cp.dir))
	}
	return err
}
