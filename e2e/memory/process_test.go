package memory

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// binaries are nicpool-ipamd and nicpool-webhook built from this checkout.
type binaries struct{ ipamd, webhook string }

var (
	buildOnce sync.Once
	built     binaries
	buildErr  error
)

// buildBinaries builds both commands once per test binary into binDir.
func buildBinaries(tb testing.TB) binaries {
	tb.Helper()
	buildOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./cmd/nicpool-ipamd", "./cmd/nicpool-webhook")
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/nicpool-ipamd ./cmd/nicpool-webhook: %w\n%s", err, out)
			return
		}
		built = binaries{ipamd: filepath.Join(binDir, "nicpool-ipamd"), webhook: filepath.Join(binDir, "nicpool-webhook")}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return built
}

// process is one running binary. Its output goes to a file kept for the failure
// message.
type process struct {
	name   string
	cmd    *exec.Cmd
	env    []string // on top of this process's environment
	log    string
	exited chan struct{}
	err    error // valid once exited is closed
	stop   sync.Once
}

func startProcess(tb testing.TB, name, bin string, env []string, args ...string) *process {
	tb.Helper()
	log := filepath.Join(tb.TempDir(), name+".log")
	out, err := os.Create(log)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		out.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, env: env, log: log, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.exited)
	}()
	tb.Cleanup(func() { p.Stop(tb) })
	return p
}

// Stop sends SIGTERM, waits for a clean exit, and kills what does not exit in time.
func (p *process) Stop(tb testing.TB) {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			tb.Logf("%s did not exit 30s after SIGTERM: killed", p.name)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// waitFor polls cond until it holds, failing tb if the process exits first or the
// timeout passes; the failure carries cond's last error and the end of the log.
func (p *process) waitFor(tb testing.TB, what string, timeout time.Duration, cond func(context.Context) error) {
	tb.Helper()
	last := errors.New("not checked yet")
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, p.exitError()
		default:
		}
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		tb.Fatalf("waiting for %s %s: %v (last: %v)\n--- end of %s's log ---\n%s", p.name, what, err, last, p.name, p.tail())
	}
}

// exitError says how the process ended; call it once exited is closed.
func (p *process) exitError() error {
	if p.err == nil {
		return fmt.Errorf("%s exited with status 0", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}

func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// alive fails tb if the process has exited.
func (p *process) alive(tb testing.TB) {
	tb.Helper()
	select {
	case <-p.exited:
		tb.Fatalf("%v\n--- end of its log ---\n%s", p.exitError(), p.tail())
	default:
	}
}

// memory is what /proc/<pid>/status says of the process, in bytes: the resident set
// now, its peak, and the now split into anonymous memory (heap, stacks) and mapped
// files (the binary's own pages).
type memory struct{ rss, hwm, anon, file int64 }

func (p *process) memory() (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text()) // "VmRSS:   12345 kB"
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.hwm = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		case "RssFile:":
			m.file = kb << 10
		}
	}
	if m.rss == 0 {
		return m, fmt.Errorf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
	}
	return m, s.Err()
}

// settle polls the resident set once a second until two readings in a row are
// within 1% of each other (startup's lists decoded, informers quiet), or the timeout
// passes; it returns the last reading and whether it settled.
func (p *process) settle(tb testing.TB, timeout time.Duration) (memory, bool) {
	tb.Helper()
	prev, err := p.memory()
	if err != nil {
		tb.Fatalf("%s: %v", p.name, err)
	}
	cur := prev
	steady := 0
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, false, func(context.Context) (bool, error) {
		m, err := p.memory()
		if err != nil {
			return false, err
		}
		prev, cur = cur, m
		if d := cur.rss - prev.rss; d*100 <= prev.rss && -d*100 <= prev.rss {
			steady++
		} else {
			steady = 0
		}
		return steady >= 2, nil
	})
	p.alive(tb)
	return cur, err == nil
}

// metric returns the value of the first sample of the Prometheus text exposition at
// url whose name and labels begin with series, e.g. `nicpool_gc_runs_total{result="success"}`.
func metric(ctx context.Context, url, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(body) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(string(line)), series)
		if !ok || !strings.HasPrefix(rest, " ") {
			continue
		}
		return strconv.ParseFloat(strings.TrimSpace(rest), 64)
	}
	return 0, fmt.Errorf("%s not served at %s", series, url)
}

// httpOK is nil when url answers 200.
func httpOK(ctx context.Context, url string) error {
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

// freeAddr is a loopback address whose port is free right now.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
