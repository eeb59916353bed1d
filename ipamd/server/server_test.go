package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/metrics"
	"github.com/nicpool/nicpool/ipamd/server"
	"github.com/nicpool/nicpool/ipamd/service"
)

// serve serves h on a socket of its own with lim until the test ends.
func serve(t *testing.T, h http.Handler, lim server.Limits) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ipamd.sock")
	l, err := server.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.ServeLimits(ctx, l, h, lim) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

// dial connects to the socket; every read and write of the test ends within a minute.
func dial(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// handler is ipamd's socket API over a service that is never reached: every request
// of these tests ends before it.
func handler(lim server.Limits) http.Handler {
	return server.HandlerLimits(&service.Service{Log: logr.Discard()}, func() bool { return true }, lim)
}

// A client that sends a request's header and part of its body, then nothing, is cut
// off after the body timeout: it used to hold its connection and goroutine for good.
func TestStalledBodyIsCutOff(t *testing.T) {
	lim := server.DefaultLimits
	lim.BodyTimeout = 100 * time.Millisecond
	path := serve(t, handler(lim), lim)
	for _, p := range []string{api.PathCNI} {
		c := dial(t, path)
		if _, err := fmt.Fprintf(c, "POST %s HTTP/1.0\r\nHost: ipamd\r\nContent-Length: 1000\r\n\r\n7:nicpool,", p); err != nil {
			t.Fatal(err)
		}
		answer, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("%s: the connection of a stalled body is still open: %v", p, err)
		}
		if !strings.HasPrefix(string(answer), "HTTP/1.0 4") {
			t.Errorf("%s: answer to a stalled body %q, want a 4xx", p, answer)
		}
	}
}

// The socket speaks one protocol, the frame on api.PathCNI: the JSON verbs it used to
// serve beside it are gone.
func TestOnlyFramesAreServed(t *testing.T) {
	path := serve(t, handler(server.DefaultLimits), server.DefaultLimits)
	for _, p := range []string{"/v1/allocate", "/v1/release", "/v1/check", "/v1/gc", "/v1/status"} {
		c := dial(t, path)
		body := `{"containerID":"c1","interface":"eth0","pod":{"namespace":"ns","name":"p"},"network":{"name":"n"}}`
		if _, err := fmt.Fprintf(c, "POST %s HTTP/1.0\r\nHost: ipamd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", p, len(body), body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s: %v", p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: HTTP %d, want 404", p, resp.StatusCode)
		}
	}
}

// A connection left open after its answer is closed after the idle timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	lim := server.DefaultLimits
	lim.IdleTimeout = 100 * time.Millisecond
	path := serve(t, handler(lim), lim)
	c := dial(t, path)
	if _, err := io.WriteString(c, "GET "+api.PathHealthz+" HTTP/1.1\r\nHost: ipamd\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := r.ReadByte(); err != io.EOF {
		t.Errorf("idle connection: read %v, want it closed (EOF)", err)
	}
}

// No more than MaxConns connections are served at once; the others wait their turn
// in the socket's backlog and are served once one ends.
func TestConnectionCap(t *testing.T) {
	const cap, clients = 2, 6
	var active, most atomic.Int32
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := active.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		active.Add(-1)
		_, _ = io.WriteString(w, "ok")
	})
	path := serve(t, h, server.Limits{MaxConns: cap})
	var wg sync.WaitGroup
	answers := make([]string, clients)
	for i := range clients {
		c := dial(t, path)
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			b, _ := io.ReadAll(c)
			answers[i] = string(b)
		})
	}
	deadline := time.Now().Add(time.Minute)
	for active.Load() < cap && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if most.Load() > cap {
		t.Errorf("%d connections served at once, cap %d", most.Load(), cap)
	}
	for i, a := range answers {
		if !strings.HasSuffix(a, "ok") {
			t.Errorf("client %d: answer %q", i, a)
		}
	}
}

// netstring is one field of the front's frame.
func netstring(s string) string { return fmt.Sprintf("%d:%s,", len(s), s) }

// A call of the front over ipamd's bounds is handed back (421) to nicpool-cni: a body
// over api.MaxFrame without being read, a configuration over api.MaxConfig without
// being parsed.
func TestCallsOverTheBoundsAreHandedBack(t *testing.T) {
	path := serve(t, handler(server.DefaultLimits), server.DefaultLimits)
	before := testutil.ToFloat64(metrics.CNICalls.WithLabelValues("ADD", "size"))

	c := dial(t, path)
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.0\r\nHost: ipamd\r\nContent-Length: %d\r\n\r\n", api.PathCNI, api.MaxFrame+1); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != api.StatusHandBack {
		t.Fatalf("a frame over MaxFrame, of which nothing was sent: %v, %v; want 421 at once", resp, err)
	}

	frame := netstring("nicpool") + netstring("42")
	for _, v := range []string{"ADD", "c1", "/var/run/netns/p1", "net1", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p", "/opt/cni/bin", ""} {
		frame += netstring(v)
	}
	stdin := `{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool"},"unused":"` + strings.Repeat("x", api.MaxConfig) + `"}`
	frame += netstring("other") + netstring(stdin)
	c = dial(t, path)
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.0\r\nHost: ipamd\r\nContent-Length: %d\r\n\r\n%s", api.PathCNI, len(frame), frame); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != api.StatusHandBack {
		t.Fatalf("a configuration over MaxConfig: %v, %v; want 421", resp, err)
	}
	if got := testutil.ToFloat64(metrics.CNICalls.WithLabelValues("ADD", "size")) - before; got != 1 {
		t.Errorf("nicpool_ipamd_cni_calls_total{verb=ADD,result=size} rose by %v, want 1", got)
	}
}
