// Package testenv starts a real control plane (etcd and kube-apiserver built from
// source into bin/ by `make tools`) on free ports, installs nicpool's CRDs and returns
// clients for it. It always stops what it started: Stop is idempotent, and StartT
// registers it with t.Cleanup.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nicpool/nicpool/crds"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/scheme"
)

// Options tune the control plane.
type Options struct {
	// WebhookInstallOptions registers webhooks with the API server (see envtest).
	WebhookInstallOptions envtest.WebhookInstallOptions
	// ExtraCRDs are installed beside nicpool's.
	ExtraCRDs []*apiextensionsv1.CustomResourceDefinition
	// APIServerArgs are extra kube-apiserver flags, "--name" → values.
	APIServerArgs map[string][]string
	// Output attaches etcd's and kube-apiserver's output to this process.
	Output bool
	// ConfigureAPIServer, when set, adjusts the API server before it starts.
	ConfigureAPIServer func(*envtest.APIServer) error
}

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client with core types and nicpool's types.
	Client client.Client
	// Scheme knows core types and nicpool's types.
	Scheme *runtime.Scheme
	// Kubeconfig is an admin kubeconfig file for the API server.
	Kubeconfig string
	// Env is the underlying envtest environment (webhook install options, binaries).
	Env *envtest.Environment

	dir      string
	stopOnce sync.Once
	stopErr  error
}

// NewScheme returns nicpool's scheme (crds/scheme) with CustomResourceDefinitions,
// which the tests install and read.
func NewScheme() *runtime.Scheme { return scheme.New(apiextensionsv1.AddToScheme) }

// RepoRoot is the module root of nicpool, found from this source file (or, in a
// binary built with -trimpath, from the working directory).
func RepoRoot() string {
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		panic("testenv: cannot locate source file")
	}
	if filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	// Built with -trimpath (`make build`), the source path is the module path, so
	// the checkout is found from where the command runs: the working directory or the
	// nearest parent whose go.mod is nicpool's.
	wd, err := os.Getwd()
	if err != nil {
		panic("testenv: cannot locate the checkout: " + err.Error())
	}
	for d := wd; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if first, _, _ := strings.Cut(string(data), "\n"); strings.TrimSpace(first) == "module github.com/nicpool/nicpool" {
				return d
			}
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}

// BinDir is where the control-plane binaries are: $KUBEBUILDER_ASSETS when set,
// else the repository's bin/.
func BinDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "bin")
}

// Start brings up etcd and kube-apiserver and installs the CRDs.
func Start(opts Options) (*Env, error) {
	bin := BinDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s missing in %s: run `make tools` first: %w", name, bin, err)
		}
	}
	defs, err := crds.Definitions()
	if err != nil {
		return nil, fmt.Errorf("load nicpool CRDs: %w", err)
	}
	scheme := NewScheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		Scheme:                scheme,
		CRDInstallOptions: envtest.CRDInstallOptions{
			CRDs:               append(defs, opts.ExtraCRDs...),
			ErrorIfPathMissing: true,
		},
		WebhookInstallOptions:    opts.WebhookInstallOptions,
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		AttachControlPlaneOutput: opts.Output,
	}
	api := env.ControlPlane.GetAPIServer()
	for name, values := range opts.APIServerArgs {
		api.Configure().Set(name, values...)
	}
	if opts.ConfigureAPIServer != nil {
		if err := opts.ConfigureAPIServer(api); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start control plane from %s: %w", bin, err)
	}
	e := &Env{Config: cfg, Scheme: scheme, Env: env}
	if err := e.init(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) init() error {
	c, err := client.New(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		return fmt.Errorf("client for control plane: %w", err)
	}
	e.Client = c
	dir, err := os.MkdirTemp("", "nicpool-testenv-")
	if err != nil {
		return err
	}
	e.dir = dir
	user, err := e.Env.ControlPlane.AddUser(envtest.User{Name: "nicpool-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add admin user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(e.Kubeconfig, kc, 0o600)
}

// Stop stops kube-apiserver and etcd and removes their data. It is safe to call more
// than once.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		e.stopErr = e.Env.Stop()
		if e.dir != "" {
			e.stopErr = errors.Join(e.stopErr, os.RemoveAll(e.dir))
		}
	})
	return e.stopErr
}

// StartT starts a control plane for a test and stops it when the test ends.
func StartT(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := Start(opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("testenv: stop: %v", err)
		}
	})
	return e
}

// GVR of nicpool's resources, for dynamic and table clients.
var (
	PoolsResource      = v2beta1.GroupVersion.WithResource("spiderippools")
	EndpointsResource  = v2beta1.GroupVersion.WithResource("spiderendpoints")
	ReservedIPResource = v2beta1.GroupVersion.WithResource("spiderreservedips")
	BlocksResource     = ipamv1alpha1.GroupVersion.WithResource("ipblocks")
)
