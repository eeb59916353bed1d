package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
)

// nicpool-ipamd as a node runs it: flags, socket, metrics. It is killed (SIGKILL)
// while ADDs are in flight and started again; the next ADDs give every pod exactly
// one address and the DELs leave nothing (I6).
func TestBinaryKilledMidAllocationAndRestarted(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "nicpool-ipamd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nicpool-ipamd")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nicpool-ipamd: %v\n%s", err, out)
	}
	createNamespace(t, "bin")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("bin", "10.87.0.0/16", []string{"10.87.0.1-10.87.0.100"}))
	const n = 100
	pods := make([]*corev1.Pod, n)
	parallel(t, n, func(i int) {
		pods[i] = createPod(t, "bin", fmt.Sprintf("p-%d", i), "bin-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["bin"]}]`))
	})
	sock := filepath.Join(t.TempDir(), "ipamd.sock")
	metricsAddr := freeAddr(t)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "--node-name", "bin-node", "--socket", sock, "--kubeconfig", env.Kubeconfig,
			"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if testing.Verbose() {
			cmd.Stderr = os.Stderr
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		fixtures.Eventually(t, "nicpool-ipamd to answer on its socket", func() bool { return healthy(sock) })
		return cmd
	}
	c := api.NewClient(sock, 30*time.Second)

	first := start()
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	var answered atomic.Int32
	var once sync.Once
	firstAnswer, killed := make(chan struct{}), make(chan struct{})
	go func() {
		// Kill the daemon as soon as the first ADD has answered: the rest are in flight.
		<-firstAnswer
		_ = first.Process.Signal(syscall.SIGKILL)
		close(killed)
	}()
	parallel(t, n, func(i int) {
		if _, err := c.Allocate(ctx, addReq(pods[i], "eth0", "c")); err == nil {
			answered.Add(1)
			once.Do(func() { close(firstAnswer) })
		}
	})
	<-killed
	_ = first.Wait()
	t.Logf("%d of %d ADDs answered before the kill; the pool then held %d addresses", answered.Load(), n, len(records(t, "bin")))

	start()
	parallel(t, n, func(i int) {
		if _, err := c.Allocate(ctx, addReq(pods[i], "eth0", "c")); err != nil {
			t.Errorf("ADD of pod %d after the restart: %v", i, err)
		}
	})
	holders := map[string]int{}
	for _, rec := range records(t, "bin") {
		holders[rec.PodUID]++
	}
	if len(holders) != n {
		t.Errorf("%d pods hold addresses, want %d", len(holders), n)
	}
	for uid, k := range holders {
		if k != 1 {
			t.Errorf("pod UID %s holds %d addresses", uid, k)
		}
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"nicpool_ipamd_allocations_total", "nicpool_ipamd_allocation_duration_seconds", "nicpool_ledger_ops_per_write"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	parallel(t, n, func(i int) {
		deletePod(t, pods[i])
		if _, err := c.Release(ctx, delReq(pods[i], "eth0", "c")); err != nil {
			t.Errorf("DEL of pod %d: %v", i, err)
		}
	})
	if left := len(records(t, "bin")); left != 0 {
		t.Errorf("%d addresses left after every DEL", left)
	}
	checkInvariants(t, false)
}

func healthy(sock string) bool {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://ipamd" + api.PathHealthz)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
