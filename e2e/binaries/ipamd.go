package binaries

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
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
	// Pprof serves Go's runtime profiles on /debug/pprof/ (host:port) when
	// IpamdOptions.Pprof asked for them, else "".
	Pprof string

	bin, kubeconfig string
	env             []string
	opts            IpamdOptions
}

// IpamdOptions are what a test asks of an ipamd beyond the DaemonSet's settings.
type IpamdOptions struct {
	// Pprof serves the runtime profiles (--pprof-bind-address) on a free loopback port.
	Pprof bool
}

// StartIpamd runs nicpool-ipamd for node as the DaemonSet runs it (flags, Go runtime
// settings of manifests/base) against the API server of kubeconfig, with its socket
// in runDir (the node's /run/nicpool, under the same file name) and its log beside it. A unix socket's path must fit in 108 bytes: keep
// runDir short.
func StartIpamd(bin, kubeconfig, node, runDir string) (*Ipamd, error) {
	return StartIpamdWith(bin, kubeconfig, node, runDir, IpamdOptions{})
}

// StartIpamdWith is StartIpamd with opts.
func StartIpamdWith(bin, kubeconfig, node, runDir string, opts IpamdOptions) (*Ipamd, error) {
	env, err := DeployedEnv("ipamd")
	if err != nil {
		return nil, err
	}
	d := &Ipamd{Node: node, RunDir: runDir, Socket: filepath.Join(runDir, filepath.Base(api.DefaultSocketPath)), bin: bin, kubeconfig: kubeconfig, env: env, opts: opts}
	return d, d.start()
}

// start runs the process on two loopback ports free right now. Another process may
// take one of them before ipamd binds it: WaitReady starts again on new ports then.
func (d *Ipamd) start() (err error) {
	if d.Health, err = FreeAddr(); err != nil {
		return err
	}
	if d.Metrics, err = FreeAddr(); err != nil {
		return err
	}
	args := []string{"--kubeconfig", d.kubeconfig, "--node-name", d.Node, "--socket", d.Socket,
		"--metrics-bind-address", d.Metrics, "--health-probe-bind-address", d.Health}
	if d.opts.Pprof {
		if d.Pprof, err = FreeAddr(); err != nil {
			return err
		}
		args = append(args, "--pprof-bind-address", d.Pprof)
	}
	d.Process, err = Start("nicpool-ipamd "+d.Node, d.bin, d.env, filepath.Join(d.RunDir, "ipamd.log"), args...)
	return err
}

// portRaces bounds the restarts of an ipamd that lost one of its ports.
const portRaces = 3

// lostPort reports whether the log says a port was taken before ipamd bound it.
func (d *Ipamd) lostPort() bool {
	b, _ := os.ReadFile(d.Log)
	return strings.Contains(string(b), "address already in use") &&
		(strings.Contains(string(b), d.Health) || strings.Contains(string(b), d.Metrics) || (d.Pprof != "" && strings.Contains(string(b), d.Pprof)))
}

// WaitReady waits until /readyz answers: the caches have synced and the socket
// serves.
// An ipamd whose health or metrics port was taken before it bound it (it logs the
// bind error and serves on) is stopped and started again on new ports.
func (d *Ipamd) WaitReady(timeout time.Duration) error {
	for race := 0; ; race++ {
		lost := false
		err := d.WaitFor("to be ready (/readyz)", timeout, func(ctx context.Context) error {
			if race < portRaces && d.lostPort() {
				lost = true
				return nil
			}
			return HTTPOK(ctx, "http://"+d.Health+"/readyz")
		})
		if err != nil || !lost {
			return err
		}
		d.Stop(30 * time.Second)
		if err := d.start(); err != nil {
			return err
		}
	}
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
