package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicpool/nicpool/ipamd/api"
)

// serve answers on a unix socket with handler, as ipamd's net/http server does, and
// returns a client for it.
func serve(t *testing.T, handler http.HandlerFunc, timeout time.Duration) *api.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ipamd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return api.NewClient(sock, timeout)
}

// The client's HTTP is ipamd's: the request arrives as net/http parses it, and every
// shape of answer net/http writes (short, long without a declared length, an error
// status) is read back whole.
func TestClientSpeaksNetHTTP(t *testing.T) {
	long := strings.Repeat("x", 64<<10) // past net/http's buffer: no Content-Length
	var got api.AllocateRequest
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != api.PathAllocate || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request line", http.StatusBadRequest)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch got.Pod.Name {
		case "short":
			_ = json.NewEncoder(w).Encode(&api.AllocateResponse{Interface: "eth0", IPs: []api.IPConfig{{Address: "10.1.0.7/16", Pool: "p"}}})
		case "long":
			w.(http.Flusher).Flush() // headers out before the body: no length to declare
			_ = json.NewEncoder(w).Encode(&api.AllocateResponse{Interface: "eth0", IPs: []api.IPConfig{{Address: "10.1.0.8/16", Pool: long}}})
		case "refused":
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(&api.Error{Code: api.CodeNoPool, Message: "no pool"})
		default:
			http.Error(w, "plain text", http.StatusTeapot)
		}
	}, 10*time.Second)
	ctx := context.Background()
	req := func(name string) *api.AllocateRequest {
		return &api.AllocateRequest{Attachment: api.Attachment{ContainerID: "c1", Interface: "eth0"}, Pod: api.Pod{Namespace: "ns", Name: name, UID: "u1"}}
	}

	resp, err := c.Allocate(ctx, req("short"))
	if err != nil || len(resp.IPs) != 1 || resp.IPs[0].Address != "10.1.0.7/16" {
		t.Fatalf("short answer: %+v, %v", resp, err)
	}
	if got.ContainerID != "c1" || got.Pod.UID != "u1" {
		t.Errorf("ipamd received %+v", got)
	}
	if resp, err = c.Allocate(ctx, req("long")); err != nil || len(resp.IPs) != 1 || resp.IPs[0].Pool != long {
		t.Fatalf("long answer: %v", err)
	}
	var e *api.Error
	if _, err = c.Allocate(ctx, req("refused")); !errors.As(err, &e) || e.Code != api.CodeNoPool || e.Message != "no pool" {
		t.Errorf("error answer: %v, want ipamd's error with its code", err)
	}
	if _, err = c.Allocate(ctx, req("other")); !errors.As(err, &e) || e.Code != api.CodeInternal || !strings.Contains(e.Message, "HTTP 418") {
		t.Errorf("non-JSON error answer: %v, want an internal error naming the status", err)
	}
}

// Whatever keeps the answer from arriving whole is "unreachable", which the plugin
// turns into "try again later": no socket, a timeout, a cancelled call, a connection
// cut mid-answer.
func TestClientUnreachable(t *testing.T) {
	ctx := context.Background()
	none := api.NewClient(filepath.Join(t.TempDir(), "none.sock"), time.Second)
	if _, err := none.Status(ctx, &api.StatusRequest{}); !errors.Is(err, api.ErrUnreachable) {
		t.Errorf("no socket: %v", err)
	}

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := serve(t, func(w http.ResponseWriter, r *http.Request) { <-release }, 200*time.Millisecond)
	if _, err := slow.Status(ctx, &api.StatusRequest{}); !errors.Is(err, api.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer within the timeout: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	arrived := make(chan struct{}, 1)
	slowNoTimeout := serve(t, func(w http.ResponseWriter, r *http.Request) { arrived <- struct{}{}; <-release }, 0)
	go func() { <-arrived; cancel() }() // cancelled while ipamd holds the request
	if _, err := slowNoTimeout.Status(cctx, &api.StatusRequest{}); !errors.Is(err, api.ErrUnreachable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}

	cut := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte(`{"ready":`))
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}, time.Second)
	if _, err := cut.Status(ctx, &api.StatusRequest{}); !errors.Is(err, api.ErrUnreachable) {
		t.Errorf("answer cut short: %v", err)
	}
}

// The Go CNI plugin, which imports this package, starts once per CNI call the front
// hands it: it must not link net/http (and TLS with it) again, the bulk of its
// start-up once.
func TestPluginLinksNoNetHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nicpool/nicpool/cmd/nicpool-cni").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "net/http" || pkg == "crypto/tls" {
			t.Errorf("cmd/nicpool-cni links %s", pkg)
		}
	}
}
