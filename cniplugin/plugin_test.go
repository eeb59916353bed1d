package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/server"
)

// fakeIPAMD answers frames on a unix socket as ipamd does (server.ServeFrame, the
// plugin's library), with a service of canned answers per verb, and records what the
// service was asked and the frames it got. It stands in for ipamd only to test the
// plugin's translation between CNI and ipamd's verbs; the real ipamd is exercised by
// the integration tests.
type fakeIPAMD struct {
	// socket is where it listens; the configurations name it as RunDir/ipamd.sock, which
	// the test's environment relocates to socket's directory.
	socket string

	// dropFirst is how many connections to close unanswered before serving.
	dropFirst atomic.Int32

	mu       sync.Mutex
	answers  map[string]answer
	requests map[string][]byte
	frames   []*api.Frame
}

// droppingListener closes the connections its fake is told to drop.
type droppingListener struct {
	net.Listener
	f *fakeIPAMD
}

func (l droppingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.f.dropFirst.Load() > 0 {
			l.f.dropFirst.Add(-1)
			_ = c.Close()
			continue
		}
		return c, nil
	}
}

// answer is the service's answer to a verb: body is its response, or an api.Error it
// fails with; a string body is written raw with status, in place of a frame's answer.
type answer struct {
	status int
	body   any
}

func startFakeIPAMD(t *testing.T) *fakeIPAMD {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "nicpool-fake-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	t.Setenv(EnvRunDir, dir)
	f := &fakeIPAMD{socket: filepath.Join(dir, "ipamd.sock"), answers: map[string]answer{}, requests: map[string][]byte{}}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = srv.Serve(droppingListener{l, f}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

func (f *fakeIPAMD) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fr, err := api.DecodeFrame(body)
	if r.URL.Path != api.PathCNI || err != nil {
		http.Error(w, fmt.Sprintf("not a frame on %s: %v", api.PathCNI, err), http.StatusNotFound)
		return
	}
	f.mu.Lock()
	f.frames = append(f.frames, fr)
	a := f.answers[fr.Env["CNI_COMMAND"]]
	f.mu.Unlock()
	if raw, isRaw := a.body.(string); isRaw {
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, raw)
		return
	}
	answer, handOff := server.ServeFrame(r.Context(), fr, canned{f})
	if handOff != nil {
		http.Error(w, handOff.Error(), api.StatusHandBack)
		return
	}
	server.WriteAnswer(w, answer)
}

// canned is the fake's service.
type canned struct{ f *fakeIPAMD }

func take[Resp any](f *fakeIPAMD, verb string, req any) (*Resp, error) {
	b, _ := json.Marshal(req)
	f.mu.Lock()
	f.requests[verb] = b
	a, ok := f.answers[verb]
	f.mu.Unlock()
	switch body := a.body.(type) {
	case api.Error:
		return nil, &body
	case Resp:
		return &body, nil
	}
	if !ok {
		return nil, &api.Error{Code: api.CodeInternal, Message: "no answer for " + verb}
	}
	panic(fmt.Sprintf("the answer to %s is a %T", verb, a.body))
}

func (c canned) Allocate(_ context.Context, req *api.AllocateRequest) (*api.AllocateResponse, error) {
	return take[api.AllocateResponse](c.f, "ADD", req)
}

func (c canned) Release(_ context.Context, req *api.ReleaseRequest) (*api.ReleaseResponse, error) {
	return take[api.ReleaseResponse](c.f, "DEL", req)
}

func (c canned) Check(_ context.Context, req *api.CheckRequest) (*api.CheckResponse, error) {
	return take[api.CheckResponse](c.f, "CHECK", req)
}

func (c canned) GC(_ context.Context, req *api.GCRequest) (*api.GCResponse, error) {
	return take[api.GCResponse](c.f, "GC", req)
}

func (c canned) Status(_ context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	return take[api.StatusResponse](c.f, "STATUS", req)
}

// answer sets the answer to verb.
func (f *fakeIPAMD) answer(verb string, status int, body any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[verb] = answer{status, body}
}

// request decodes what the service was asked for verb; false when it was not.
func (f *fakeIPAMD) request(t *testing.T, verb string, into any) bool {
	t.Helper()
	f.mu.Lock()
	body, ok := f.requests[verb]
	f.mu.Unlock()
	if !ok {
		return false
	}
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("undecodable %s request: %v", verb, err)
	}
	return true
}

func (f *fakeIPAMD) conf(cniVersion string, ipamExtra string) []byte {
	ipam := `"type":"nicpool","ipam_unix_socket_path":"` + RunDir + `/ipamd.sock","request_timeout":"2s"`
	if ipamExtra != "" {
		ipam += "," + ipamExtra
	}
	return []byte(`{"cniVersion":"` + cniVersion + `","name":"macvlan-net","type":"macvlan","master":"veth0","ipam":{` + ipam + `}}`)
}

// process is the plugin as nicpool-cni runs it, printing to stdout under name.
func process(stdout io.Writer, name string) *cni.Plugin {
	p := Process(stdout)
	p.Name = name
	return p
}

func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

const podArgs = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0;K8S_POD_UID=uid-1;K8S_POD_INFRA_CONTAINER_ID=c1"

func cmdArgs(stdin []byte) *cni.CmdArgs {
	return &cni.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/p1", IfName: "net1", Args: podArgs, Path: "/opt/cni/bin", StdinData: stdin}
}

func TestAddSendsThePodAndPrintsTheResult(t *testing.T) {
	f := startFakeIPAMD(t)
	f.answer("ADD", 200, api.AllocateResponse{Interface: "net1", IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1", Pool: "v4"}}})
	var out bytes.Buffer
	p := process(&out, "")
	err := p.RelayFuncs().Add(cmdArgs(f.conf("0.3.1", `"default_ipv4_ippool":["v4"],"clean_gateway":true`)))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	var req api.AllocateRequest
	if !f.request(t, "ADD", &req) {
		t.Fatal("ADD did not call ipamd")
	}
	want := api.AllocateRequest{
		Attachment: api.Attachment{ContainerID: "c1", Interface: "net1"},
		NetNS:      "/var/run/netns/p1",
		Pod:        api.Pod{Namespace: "ns1", Name: "web-0", UID: "uid-1"},
		Network:    api.NetworkConfig{Name: "macvlan-net", DefaultIPv4Pools: []string{"v4"}, CleanGateway: true},
	}
	if g, w := mustJSON(t, req), mustJSON(t, want); g != w {
		t.Errorf("request\n got %s\nwant %s", g, w)
	}
	var got struct {
		CNIVersion string `json:"cniVersion"`
		IPs        []struct{ Version, Address, Gateway string }
		Routes     []struct{ Dst, GW string }
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not a result: %v\n%s", err, out.String())
	}
	// ipamd decided no clean gateway for this pod; its answer wins over the config.
	if got.CNIVersion != "0.3.1" || len(got.IPs) != 1 || got.IPs[0] != (struct{ Version, Address, Gateway string }{"4", "10.6.0.7/16", "10.6.0.1"}) ||
		len(got.Routes) != 1 || got.Routes[0] != (struct{ Dst, GW string }{"0.0.0.0/0", "10.6.0.1"}) {
		t.Errorf("result %s", out.String())
	}
}

func TestAddErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     string
		status   int
		body     any
		wantCode uint
		wantMsg  string
	}{
		{"no pod in CNI_ARGS", "K8S_POD_NAME=web-0", 200, nil, types.ErrInvalidEnvironmentVariables, "K8S_POD_NAMESPACE"},
		{"malformed CNI_ARGS", "garbage", 200, nil, types.ErrInvalidEnvironmentVariables, "KEY=VALUE"},
		{"ipamd starting", podArgs, 503, api.Error{Code: api.CodeTryAgainLater, Message: "caches not synced"}, types.ErrTryAgainLater, "try again later"},
		{"pool exhausted", podArgs, 409, api.Error{Code: api.CodePoolExhausted, Message: "pool v4 has no free address: add addresses to pool v4"}, api.CodePoolExhausted, "pool v4 has no free address"},
		{"no pool", podArgs, 400, api.Error{Code: api.CodeNoPool, Message: "no pool selected for net1"}, api.CodeNoPool, "no pool selected"},
		{"answer without code", podArgs, 400, api.Error{Message: "odd"}, types.ErrInternal, "odd"},
		{"HTTP error, not a frame's answer", podArgs, 500, "boom", types.ErrTryAgainLater, "HTTP 500"},
		{"200 without the frame's headers", podArgs, 200, "{", types.ErrTryAgainLater, "lacks"},
		{"ipamd declines the call", podArgs, api.StatusHandBack, "no", types.ErrTryAgainLater, "declined"},
		{"no address", podArgs, 200, api.AllocateResponse{Interface: "net1"}, api.CodeNoPool, "select a pool"},
		{"other interface", podArgs, 200, api.AllocateResponse{Interface: "net2", IPs: []api.IPConfig{{Address: "10.6.0.7/16"}}}, types.ErrInternal, `"net2"`},
		{"bad address", podArgs, 200, api.AllocateResponse{Interface: "net1", IPs: []api.IPConfig{{Address: "10.6.0.7"}}}, types.ErrInternal, "not a usable result"},
		// The runtime's variables are sent as they are: a call over ipamd's frame bound
		// is refused here, naming the variable, never sent to be declined.
		{"CNI_ARGS over ipamd's bound", podArgs + ";PADDING=" + strings.Repeat("a", api.MaxFrame), 200, nil, types.ErrInvalidEnvironmentVariables, "CNI_ARGS is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFakeIPAMD(t)
			f.answer("ADD", tt.status, tt.body)
			var out bytes.Buffer
			a := cmdArgs(f.conf("1.1.0", ""))
			a.Args = tt.args
			err := process(&out, "").RelayFuncs().Add(a)
			if cniCode(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %v: want code %d mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
			if out.Len() != 0 {
				t.Errorf("a failed ADD printed %s", out.String())
			}
		})
	}
}

// TestDelOverTheFrameBoundLetsThePodGo: a DEL whose runtime variables ipamd would not
// read succeeds without asking ipamd, leaving the release to the garbage collector,
// as a DEL ipamd declines does.
func TestDelOverTheFrameBoundLetsThePodGo(t *testing.T) {
	f := startFakeIPAMD(t)
	f.answer("DEL", 200, api.ReleaseResponse{})
	a := cmdArgs(f.conf("1.0.0", ""))
	a.Args = podArgs + ";PADDING=" + strings.Repeat("a", api.MaxFrame)
	if err := process(io.Discard, "").RelayFuncs().Del(a); err != nil {
		t.Fatalf("DEL: %v, want success", err)
	}
	var req api.ReleaseRequest
	if f.request(t, "DEL", &req) {
		t.Errorf("ipamd was sent the DEL: %+v", req)
	}
}

func TestUnreachableIPAMD(t *testing.T) {
	dir, err := os.MkdirTemp("", "nicpool-gone-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t.Setenv(EnvRunDir, dir)
	// A socket file whose daemon died (killed, so it could not remove it) refuses
	// connections; a missing file is what a node without ipamd has.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	_ = l.Close()
	for _, sock := range []string{"none.sock", "stale.sock", "no-such-dir/ipamd.sock"} {
		conf := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","ipam_unix_socket_path":"` + RunDir + "/" + sock + `","request_timeout":1},"cni.dev/valid-attachments":[]}`)
		p := process(io.Discard, "").RelayFuncs()
		for verb, want := range map[string]uint{"ADD": types.ErrTryAgainLater, "GC": types.ErrTryAgainLater, "STATUS": types.ErrPluginNotAvailable} {
			fn := map[string]func(*cni.CmdArgs) error{"ADD": p.Add, "GC": p.GC, "STATUS": p.Status}[verb]
			err := fn(cmdArgs(conf))
			if cniCode(err) != want || !strings.Contains(err.Error(), "ipamd is not answering") {
				t.Errorf("%s on %s: %v: want code %d saying ipamd is not answering", verb, sock, err, want)
			}
		}
		// A pod being deleted must not wait for a node daemon that is being rolled out
		// or uninstalled: DEL gives up on ipamd and leaves the release to the GC.
		if err := p.Del(cmdArgs(conf)); err != nil {
			t.Errorf("DEL on %s: %v: want success once ipamd stays unreachable", sock, err)
		}
	}
}

// DEL keeps trying while ipamd is unreachable, and releases through it as soon as it
// answers: here it drops the first connection unanswered, as a daemon killed mid-call.
func TestDelRetriesWhileIPAMDIsUnreachable(t *testing.T) {
	f := startFakeIPAMD(t)
	f.answer("DEL", 200, api.ReleaseResponse{Released: []string{"10.6.0.7"}})
	f.dropFirst.Store(1)
	if err := process(io.Discard, "").RelayFuncs().Del(cmdArgs(f.conf("1.1.0", ""))); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	var req api.ReleaseRequest
	if !f.request(t, "DEL", &req) || req.ContainerID != "c1" {
		t.Errorf("DEL did not reach ipamd once it answered: %+v", req)
	}
	if f.dropFirst.Load() != 0 {
		t.Errorf("the dropped connection was never made")
	}
}

func TestTimeoutIsTryAgainLater(t *testing.T) {
	dir, err := os.MkdirTemp("", "nicpool-hang-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t.Setenv(EnvRunDir, dir)
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	defer close(release)
	conf := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"ipam_unix_socket_path":"` + RunDir + `/s","request_timeout":1}}`)
	err = process(io.Discard, "").RelayFuncs().Add(cmdArgs(conf))
	if cniCode(err) != types.ErrTryAgainLater {
		t.Errorf("ADD against a stuck ipamd: %v: want code 11", err)
	}
}

func TestDel(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     any
		wantCode uint
	}{
		{"released", 200, api.ReleaseResponse{Released: []string{"10.6.0.7"}}, 0},
		{"ipamd starting is retried", 503, api.Error{Code: api.CodeTryAgainLater, Message: "starting"}, types.ErrTryAgainLater},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFakeIPAMD(t)
			f.answer("DEL", tt.status, tt.body)
			a := cmdArgs(f.conf("1.0.0", ""))
			// DEL must not depend on the pod identity or on a prevResult it does not use.
			a.Args = "broken"
			a.StdinData = []byte(strings.Replace(string(a.StdinData), `"name"`, `"prevResult":{"ips":"x"},"name"`, 1))
			err := process(io.Discard, "").RelayFuncs().Del(a)
			if cniCode(err) != tt.wantCode || (tt.wantCode == 0) != (err == nil) {
				t.Fatalf("DEL: %v, want code %d", err, tt.wantCode)
			}
			var req api.ReleaseRequest
			if !f.request(t, "DEL", &req) || req.ContainerID != "c1" || req.Interface != "net1" || req.Network.Name != "macvlan-net" {
				t.Errorf("release request %+v", req)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	prev := `"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/var/run/netns/p1"}],"ips":[{"address":"10.6.0.7/16","gateway":"10.6.0.1","interface":0}]}`
	tests := []struct {
		name     string
		prev     string
		status   int
		body     any
		wantCode uint
	}{
		{"reservation matches", prev, 200, api.CheckResponse{IPs: []api.IPConfig{{Address: "10.6.0.7/16", Pool: "v4"}}}, 0},
		{"reservation differs", prev, 200, api.CheckResponse{IPs: []api.IPConfig{{Address: "10.6.0.8/16", Pool: "v4"}}}, cni.CodeReservationDiffers},
		{"an extra address differs", prev, 200, api.CheckResponse{IPs: []api.IPConfig{{Address: "10.6.0.7/16"}, {Address: "fd00::7/64"}}}, cni.CodeReservationDiffers},
		{"reservation empty", prev, 200, api.CheckResponse{}, cni.CodeReservationMissing},
		{"reservation unknown", prev, 404, api.Error{Code: api.CodeUnknownContainer, Message: "unknown"}, cni.CodeReservationMissing},
		{"ipamd starting", prev, 503, api.Error{Code: api.CodeTryAgainLater, Message: "starting"}, types.ErrTryAgainLater},
		{"no prevResult", "", 200, api.CheckResponse{}, types.ErrInvalidNetworkConfig},
		{"prevResult undecodable", `"prevResult":{"ips":[{"address":"x"}]}`, 200, api.CheckResponse{}, types.ErrDecodingFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFakeIPAMD(t)
			f.answer("CHECK", tt.status, tt.body)
			stdin := f.conf("1.0.0", "")
			if tt.prev != "" {
				stdin = []byte(strings.Replace(string(stdin), `"name"`, tt.prev+`,"name"`, 1))
			}
			err := process(io.Discard, "").RelayFuncs().Check(cmdArgs(stdin))
			if cniCode(err) != tt.wantCode || (tt.wantCode == 0) != (err == nil) {
				t.Fatalf("CHECK: %v, want code %d", err, tt.wantCode)
			}
		})
	}
}

func TestGC(t *testing.T) {
	f := startFakeIPAMD(t)
	f.answer("GC", 200, api.GCResponse{Released: []string{"10.6.0.9"}})
	p := process(io.Discard, "").RelayFuncs()

	stdin := strings.Replace(string(f.conf("1.1.0", "")), `"name"`, `"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"net1"},{"containerID":"c2","ifname":"eth0"}],"name"`, 1)
	if err := p.GC(&cni.CmdArgs{Path: "/opt/cni/bin", StdinData: []byte(stdin)}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	var req api.GCRequest
	if !f.request(t, "GC", &req) {
		t.Fatal("GC did not call ipamd")
	}
	want := api.GCRequest{Network: api.NetworkConfig{Name: "macvlan-net"}, ValidAttachments: []api.Attachment{{ContainerID: "c1", Interface: "net1"}, {ContainerID: "c2", Interface: "eth0"}}}
	if g, w := mustJSON(t, req), mustJSON(t, want); g != w {
		t.Errorf("GC request\n got %s\nwant %s", g, w)
	}

	g := startFakeIPAMD(t)
	g.answer("GC", 200, api.GCResponse{})
	err := p.GC(&cni.CmdArgs{Path: "/opt/cni/bin", StdinData: g.conf("1.1.0", "")})
	if cniCode(err) != types.ErrInvalidNetworkConfig || g.request(t, "GC", &req) {
		t.Errorf("GC without valid-attachments must fail without releasing anything: %v", err)
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     any
		wantCode uint
		wantMsg  string
	}{
		{"ready", 200, api.StatusResponse{Ready: true}, 0, ""},
		{"exhausted", 200, api.StatusResponse{Ready: false, Message: "pool v4: 254 of 254 allocated"}, types.ErrPluginNotAvailable, "254 of 254"},
		{"exhausted without message", 200, api.StatusResponse{}, types.ErrPluginNotAvailable, "exhausted"},
		{"ipamd starting", 503, api.Error{Code: api.CodeTryAgainLater, Message: "starting"}, types.ErrPluginNotAvailable, "try again later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFakeIPAMD(t)
			f.answer("STATUS", tt.status, tt.body)
			err := process(io.Discard, "").RelayFuncs().Status(&cni.CmdArgs{Path: "/opt/cni/bin", StdinData: f.conf("1.1.0", `"default_ipv4_ippool":"v4"`)})
			if cniCode(err) != tt.wantCode || (tt.wantCode == 0) != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Fatalf("STATUS: %v, want code %d mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
			var req api.StatusRequest
			if !f.request(t, "STATUS", &req) || req.Network.Name != "macvlan-net" || len(req.Network.DefaultIPv4Pools) != 1 {
				t.Errorf("status request %+v", req)
			}
		})
	}
}

func TestLogFile(t *testing.T) {
	f := startFakeIPAMD(t)
	f.answer("DEL", 200, api.ReleaseResponse{Released: []string{"10.6.0.7"}})
	dir := t.TempDir()
	t.Setenv(EnvLogDir, dir)
	stdin := f.conf("1.1.0", `"log_file_path":"`+LogDir+`/sub/cni.log","log_level":"info"`)
	if err := process(io.Discard, NameSpiderpool).RelayFuncs().Del(cmdArgs(stdin)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "sub", "cni.log"))
	if err != nil {
		t.Fatalf("log file: %v", err)
	}
	var line map[string]any
	if err := json.Unmarshal(data, &line); err != nil {
		t.Fatalf("log line is not JSON: %v: %s", err, data)
	}
	if line["msg"] != "released" || line["container"] != "c1" || line["interface"] != "net1" || line["verb"] != "DEL" || line["plugin"] != NameSpiderpool {
		t.Errorf("log line %s", data)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
