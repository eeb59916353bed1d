package binaries

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/nicpool/nicpool/ipamd/api"
)

// Ipamd is a running nicpool-ipamd: one node's daemon.
type Ipamd struct {
	*Process
	Node string
	// RunDir is the node's /run/nicpool: it holds Socket, ipamd's unix socket.
	RunDir, Socket string
	// Health serves /readyz and /healthz, Metrics serves /metrics (host:port).
	Health, Metrics string
}

// StartIpamd runs nicpool-ipamd for node as the DaemonSet runs it (flags, Go runtime
// settings of manifests/base) against the API server of kubeconfig, with its socket
// in runDir (the node's /run/nicpool, under the same file name) and its log beside it. A unix socket's path must fit in 108 bytes: keep
// runDir short.
func StartIpamd(bin, kubeconfig, node, runDir string) (*Ipamd, error) {
	env, err := DeployedEnv("ipamd")
	if err != nil {
		return nil, err
	}
	health, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	d := &Ipamd{Node: node, RunDir: runDir, Socket: filepath.Join(runDir, filepath.Base(api.DefaultSocketPath)), Health: health, Metrics: metrics}
	d.Process, err = Start("nicpool-ipamd "+node, bin, env, filepath.Join(runDir, "ipamd.log"),
		"--kubeconfig", kubeconfig, "--node-name", node, "--socket", d.Socket,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", health)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// WaitReady waits until /readyz answers: the caches have synced and the socket
// serves.
func (d *Ipamd) WaitReady(timeout time.Duration) error {
	return d.WaitFor("to be ready (/readyz)", timeout, func(ctx context.Context) error {
		return HTTPOK(ctx, "http://"+d.Health+"/readyz")
	})
}

// HTTPOK is nil when url answers 200.
func HTTPOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
