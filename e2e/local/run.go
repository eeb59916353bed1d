package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// Cluster is a running local nicpool.
type Cluster struct {
	Env        *testenv.Env
	Kubeconfig string
}

// Up starts the control plane, installs the CRDs, applies examples/ and writes the
// admin kubeconfig to stateDir/kubeconfig.
func Up(ctx context.Context, root, stateDir string, out io.Writer) (*Cluster, error) {
	fmt.Fprintln(out, "starting etcd and kube-apiserver from", testenv.BinDir())
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Env: env}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		_ = env.Stop()
		return nil, err
	}
	data, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	c.Kubeconfig = filepath.Join(stateDir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, data, 0o600); err != nil {
		_ = env.Stop()
		return nil, err
	}
	created, err := ApplyDir(ctx, env.Client, filepath.Join(root, "examples"))
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	fmt.Fprintf(out, "applied %d objects from examples/\n", len(created))
	return c, nil
}

// Show prints the pools as `kubectl get sp` does.
func (c *Cluster) Show(ctx context.Context, out io.Writer) error {
	t, err := GetTable(ctx, c.Env.Config, testenv.PoolsResource, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\n$ kubectl get sp")
	return PrintTable(out, t)
}

// Down stops everything Up started.
func (c *Cluster) Down() error {
	return c.Env.Stop()
}
