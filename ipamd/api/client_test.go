package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
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

// answer writes ipamd's answer to a frame as ipamd/server's WriteAnswer does.
func answer(w http.ResponseWriter, exit int, stdout, stderr string) {
	w.Header().Set(api.HeaderExit, strconv.Itoa(exit))
	w.Header().Set(api.HeaderStdout, strconv.Itoa(len(stdout)))
	_, _ = io.WriteString(w, stdout+stderr)
}

// The client's HTTP is ipamd's: the frame arrives as net/http parses it, and every
// shape of answer net/http writes (short, long without a declared length, a hand-back,
// another status) is read back whole. Its verbs send the CNI call a runtime would.
func TestClientSpeaksNetHTTP(t *testing.T) {
	long := strings.Repeat("x", 64<<10) // past net/http's buffer: no Content-Length
	var got *api.Frame
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != api.PathCNI || r.Header.Get("Content-Type") != "application/octet-stream" {
			http.Error(w, "bad request line", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		f, err := api.DecodeFrame(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got = f
		switch {
		case strings.Contains(f.Env["CNI_ARGS"], "K8S_POD_NAME=short"):
			answer(w, 0, `{"cniVersion":"1.1.0","ips":[{"address":"10.1.0.7/16","gateway":"10.1.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"}]}`, `{"level":"info","msg":"allocated"}`+"\n")
		case strings.Contains(f.Env["CNI_ARGS"], "K8S_POD_NAME=long"):
			w.Header().Set(api.HeaderExit, "0")
			w.Header().Set(api.HeaderStdout, strconv.Itoa(len(long)))
			w.(http.Flusher).Flush() // headers out before the body: no length to declare
			_, _ = io.WriteString(w, long)
		case strings.Contains(f.Env["CNI_ARGS"], "K8S_POD_NAME=refused"):
			answer(w, 1, `{"code":102,"msg":"ADD: no pool"}`, "")
		case strings.Contains(f.Env["CNI_ARGS"], "K8S_POD_NAME=handback"):
			http.Error(w, "the network configuration names log_file_path", api.StatusHandBack)
		default:
			http.Error(w, "plain text", http.StatusTeapot)
		}
	}, 10*time.Second)
	ctx := context.Background()
	req := func(name string) *api.AllocateRequest {
		return &api.AllocateRequest{Attachment: api.Attachment{ContainerID: "c1", Interface: "eth0"}, Pod: api.Pod{Namespace: "ns", Name: name, UID: "u1"},
			Network: api.NetworkConfig{Name: "net1", DefaultIPv4Pools: []string{"v4"}, CleanGateway: true}}
	}

	resp, err := c.Allocate(ctx, req("short"))
	if err != nil || len(resp.IPs) != 1 || resp.IPs[0].Address != "10.1.0.7/16" || resp.IPs[0].Gateway != "10.1.0.1" || resp.Interface != "eth0" || len(resp.Routes) != 1 {
		t.Fatalf("short answer: %+v, %v", resp, err)
	}
	wantEnv := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": api.ClientNetNS, "CNI_IFNAME": "eth0",
		"CNI_ARGS": "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=short;K8S_POD_UID=u1", "CNI_PATH": api.ClientPath, "CNI_NETNS_OVERRIDE": ""}
	for k, v := range wantEnv {
		if got.Env[k] != v {
			t.Errorf("frame's %s = %q, want %q", k, got.Env[k], v)
		}
	}
	var conf api.Conf
	if err := json.Unmarshal(got.Stdin, &conf); err != nil || conf.Name != "net1" || conf.IPAM.Type != "nicpool" || len(conf.IPAM.DefaultIPv4Pools) != 1 || !conf.IPAM.CleanGateway || conf.IPAM.RequestTimeout != "10s" {
		t.Errorf("frame's stdin %s (%v)", got.Stdin, err)
	}
	if got.NetNS != api.NetNSOther || got.Name != "nicpool" || got.PID <= 0 {
		t.Errorf("frame %+v", got)
	}

	a, err := c.Call(ctx, &api.Frame{Name: "nicpool", PID: 1, Env: map[string]string{"CNI_ARGS": "K8S_POD_NAME=long"}})
	if err != nil || string(a.Stdout) != long || len(a.Stderr) != 0 || a.Exit != 0 {
		t.Fatalf("long answer: %v", err)
	}
	var e *api.Error
	if _, err = c.Allocate(ctx, req("refused")); !errors.As(err, &e) || e.Code != api.CodeNoPool || e.Message != "ADD: no pool" {
		t.Errorf("error answer: %v, want the plugin's error with its code", err)
	}
	var hb *api.HandBack
	if _, err = c.Allocate(ctx, req("handback")); !errors.As(err, &hb) || !strings.Contains(hb.Reason, "log_file_path") {
		t.Errorf("hand-back: %v, want *api.HandBack with ipamd's reason", err)
	}
	if _, err = c.Allocate(ctx, req("other")); !errors.Is(err, api.ErrUnreachable) || !strings.Contains(err.Error(), "HTTP 418") {
		t.Errorf("another status: %v, want unreachable naming the status", err)
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
