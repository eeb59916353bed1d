package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/ipamd/api"
)

// buildFront compiles the C front as `make build` does (e2e/binaries).
func buildFront(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "nicpool")
	if err := binaries.BuildFront(binaries.FrontCC, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFrontWritesTheGoEncodersBytes is the frame's golden test: the C front, run as a
// runtime runs it against a stand-in ipamd socket, sends byte for byte the request
// api.FrameRequest makes of the same call, whatever the call holds. So the wire is
// defined once, in this package; a change to the front that moves a field, a check
// or a header shows here.
func TestFrontWritesTheGoEncodersBytes(t *testing.T) {
	dir, err := os.MkdirTemp("", "nicpool-frame-") // a unix socket path is short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	front := buildFront(t, dir)
	l, err := net.Listen("unix", filepath.Join(dir, "ipamd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	missing := filepath.Join(dir, "no-such-netns")
	tests := []struct {
		name, arg0 string
		env        map[string]string
		stdin      string
		netns      string // the relation the front must find
	}{
		{"ADD of a pod", "nicpool", map[string]string{
			"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": missing, "CNI_IFNAME": "net1",
			"CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0", "CNI_PATH": "/opt/cni/bin",
		}, `{"cniVersion":"1.1.0","name":"macvlan-net","ipam":{"type":"nicpool"}}`, api.NetNSOther},
		{"installed as spiderpool, in its own namespace", "/opt/cni/bin/spiderpool", map[string]string{
			"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c2", "CNI_NETNS": "/proc/self/ns/net", "CNI_IFNAME": "eth0",
			"CNI_PATH": "/opt/cni/bin", "CNI_NETNS_OVERRIDE": "1",
		}, `{"cniVersion":"0.3.0","name":"n","ipam":{"type":"spiderpool"}}`, api.NetNSSame},
		{"GC without a netns, values holding the frame's punctuation", "nicpool", map[string]string{
			"CNI_COMMAND": "GC", "CNI_PATH": "/opt/cni/bin", "CNI_ARGS": "a:1,b,9:",
		}, "{\"name\":\"n\",\"x\":\"12:,\\u0000\"}\n", ""},
		{"empty stdin", "nicpool", map[string]string{"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(front)
			cmd.Args[0] = tt.arg0
			cmd.Env = []string{"NICPOOL_CNI_RUN_DIR=" + dir}
			for k, v := range tt.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			got := make(chan []byte, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					got <- nil
					return
				}
				defer c.Close()
				b, _ := readRequest(c)
				got <- b
				_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 2\r\n\r\nok")
			}()
			req := <-got
			if err := cmd.Wait(); err != nil || stdout.String() != "ok" {
				t.Errorf("front: %v, printed %q; want it to print ipamd's answer", err, stdout.String())
			}
			f := &api.Frame{Name: filepath.Base(tt.arg0), PID: cmd.Process.Pid, Env: tt.env, NetNS: tt.netns, Stdin: []byte(tt.stdin)}
			if want := api.FrameRequest(f); !bytes.Equal(req, want) {
				t.Errorf("the front wrote\n%q\nthe Go encoder writes\n%q", req, want)
			}
		})
	}
}

// readRequest reads one request the front sent: its head, then as many bytes as its
// Content-Length says.
func readRequest(c net.Conn) ([]byte, error) {
	var b []byte
	buf := make([]byte, 4096)
	for {
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			head := string(b[:i])
			_, v, ok := strings.Cut(head, "Content-Length: ")
			if !ok {
				return b, nil
			}
			v, _, _ = strings.Cut(v, "\r\n")
			n := 0
			for _, d := range v {
				n = n*10 + int(d-'0')
			}
			if len(b) >= i+4+n {
				return b, nil
			}
		}
		n, err := c.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			return b, err
		}
	}
}

// TestFrontKeepsIpamdsBounds: the front sends ipamd a configuration of up to
// api.MaxConfig and CNI_* variables of up to api.MaxValue, and hands anything larger
// to nicpool-cni without connecting (here nicpool-cni is not installed beside it, so
// the call then fails with code 11).
func TestFrontKeepsIpamdsBounds(t *testing.T) {
	dir, err := os.MkdirTemp("", "nicpool-bounds-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	front := buildFront(t, dir)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "ipamd.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	config := func(n int) string {
		c := `{"name":"n","ipam":{"type":"nicpool"},"pad":""}`
		return c[:len(c)-2] + strings.Repeat("x", n-len(c)) + `"}`
	}
	for _, tt := range []struct {
		name, stdin, args string
		sent              bool
	}{
		{"a configuration of MaxConfig", config(api.MaxConfig), "", true},
		{"a configuration over MaxConfig", config(api.MaxConfig + 1), "", false},
		{"CNI_ARGS of MaxValue", config(100), strings.Repeat("a", api.MaxValue), true},
		{"CNI_ARGS over MaxValue", config(100), strings.Repeat("a", api.MaxValue+1), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.stdin) != len(config(len(tt.stdin))) {
				t.Fatal("config() is off")
			}
			// A front that sent the call waits for the answer: it is killed after a
			// minute, so that the test fails rather than hangs.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, front)
			cmd.Env = []string{"NICPOOL_CNI_RUN_DIR=" + dir, "CNI_COMMAND=ADD", "CNI_CONTAINERID=c", "CNI_NETNS=/x", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=" + tt.args}
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tt.sent {
				c, err := l.Accept()
				if err != nil {
					t.Fatal(err)
				}
				req, _ := readRequest(c)
				_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 2\r\n\r\nok")
				c.Close()
				f, err := api.DecodeFrame(req[bytes.Index(req, []byte("\r\n\r\n"))+4:])
				if err != nil || string(f.Stdin) != tt.stdin || f.Env["CNI_ARGS"] != tt.args {
					t.Errorf("the frame the front sent: %v", err)
				}
				if err := cmd.Wait(); err != nil || stdout.String() != "ok" {
					t.Errorf("front: %v, printed %q", err, stdout.String())
				}
				return
			}
			_ = cmd.Wait()
			var e struct {
				Code uint   `json:"code"`
				Msg  string `json:"msg"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &e); err != nil || e.Code != 11 || !strings.Contains(e.Msg, "nicpool-cni") {
				t.Errorf("front printed %q: want error 11 naming nicpool-cni, to which it hands the call", stdout.String())
			}
			// The front has exited: a connection it made would be waiting.
			_ = l.SetDeadline(time.Now())
			if c, err := l.Accept(); err == nil {
				c.Close()
				t.Errorf("the front sent ipamd a call over its bounds")
			}
			_ = l.SetDeadline(time.Time{})
		})
	}
}
