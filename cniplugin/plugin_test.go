package cniplugin

import (
	"bytes"
	"encoding/json"
	"errors"
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
)

// fakeIPAMD answers on a unix socket with canned answers per path and records what it
// was asked. It stands in for ipamd only to test the plugin's translation between CNI
// and the socket API; the real ipamd is exercised by the integration tests.
type fakeIPAMD struct {
	// socket is where it listens; the configurations name it as RunDir/ipamd.sock, which
	// the test's environment relocates to socket's directory.
	socket string

	// dropFirst is how many connections to close unanswered before serving.
	dropFirst atomic.Int32

	mu       sync.Mutex
	answers  map[string]answer
	requests map[string][]byte
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
	f.mu.Lock()
	f.requests[r.URL.Path] = body
	a, ok := f.answers[r.URL.Path]
	f.mu.Unlock()
	if !ok {
		a = answer{http.StatusNotFound, api.Error{Code: api.CodeInternal, Message: "no answer for " + r.URL.Path}}
	}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	w.WriteHeader(a.status)
	if raw, isRaw := a.body.(string); isRaw {
		_, _ = io.WriteString(w, raw)
		return
	}
	_ = json.NewEncoder(w).Encode(a.body)
}

func (f *fakeIPAMD) answer(path string, status int, body any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[path] = answer{status, body}
}

// request decodes what the plugin sent to path; false when it sent nothing.
func (f *fakeIPAMD) request(t *testing.T, path string, into any) bool {
	t.Helper()
	f.mu.Lock()
	body, ok := f.requests[path]
	f.mu.Unlock()
	if !ok {
		return false
	}
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("plugin sent undecodable %s: %v", path, err)
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
	f.answer(api.PathAllocate, 200, api.AllocateResponse{Interface: "net1", IPs: []api.IPConfig{{Address: "10.6.0.7/16", Gateway: "10.6.0.1", Pool: "v4"}}})
	var out bytes.Buffer
	p := process(&out, "")
	err := p.Funcs().Add(cmdArgs(f.conf("0.3.1", `"default_ipv4_ippool":["v4"],"clean_gateway":true`)))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	var req api.AllocateRequest
	if !f.request(t, api.PathAllocate, &req) {
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
		{"HTTP error without JSON", podArgs, 500, "boom", api.CodeInternal, "HTTP 500"},
		{"undecodable answer", podArgs, 200, "{", types.ErrDecodingFailure, "undecodable"},
		{"no address", podArgs, 200, api.AllocateResponse{Interface: "net1"}, api.CodeNoPool, "select a pool"},
		{"other interface", podArgs, 200, api.AllocateResponse{Interface: "net2", IPs: []api.IPConfig{{Address: "10.6.0.7/16"}}}, types.ErrInternal, `"net2"`},
		{"bad address", podArgs, 200, api.AllocateResponse{Interface: "net1", IPs: []api.IPConfig{{Address: "10.6.0.7"}}}, types.ErrInternal, "not a usable result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFakeIPAMD(t)
			f.answer(api.PathAllocate, tt.status, tt.body)
			var out bytes.Buffer
			a := cmdArgs(f.conf("1.1.0", ""))
			a.Args = tt.args
			err := process(&out, "").Funcs().Add(a)
			if cniCode(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %v: want code %d mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
			if out.Len() != 0 {
				t.Errorf("a failed ADD printed %s", out.String())
			}
		})
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
		p := process(io.Discard, "").Funcs()
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
	f.answer(api.PathRelease, 200, api.ReleaseResponse{Released: []string{"10.6.0.7"}})
	f.dropFirst.Store(1)
	if err := process(io.Discard, "").Funcs().Del(cmdArgs(f.conf("1.1.0", ""))); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	var req api.ReleaseRequest
	if !f.request(t, api.PathRelease, &req) || req.ContainerID != "c1" {
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
	err = process(io.Discard, "").Funcs().Add(cmdArgs(conf))
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
			f.answer(api.PathRelease, tt.status, tt.body)
			a := cmdArgs(f.conf("1.0.0", ""))
			// DEL must not depend on the pod identity or on a prevResult it does not use.
			a.Args = "broken"
			a.StdinData = []byte(strings.Replace(string(a.StdinData), `"name"`, `"prevResult":{"ips":"x"},"name"`, 1))
			err := process(io.Discard, "").Funcs().Del(a)
			if cniCode(err) != tt.wantCode || (tt.wantCode == 0) != (err == nil) {
				t.Fatalf("DEL: %v, want code %d", err, tt.wantCode)
			}
			var req api.ReleaseRequest
			if !f.request(t, api.PathRelease, &req) || req.ContainerID != "c1" || req.Interface != "net1" || req.Network.Name != "macvlan-net" {
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
			f.answer(api.PathCheck, tt.status, tt.body)
			stdin := f.conf("1.0.0", "")
			if tt.prev != "" {
				stdin = []byte(strings.Replace(string(stdin), `"name"`, tt.prev+`,"name"`, 1))
			}
			err := process(io.Discard, "").Funcs().Check(cmdArgs(stdin))
			if cniCode(err) != tt.wantCode || (tt.wantCode == 0) != (err == nil) {
				t.Fatalf("CHECK: %v, want code %d", err, tt.wantCode)
			}
		})
	}
}

func TestGC(t *testing.T) {
	f := startFakeIPAMD(t)
	f.answer(api.PathGC, 200, api.GCResponse{Released: []string{"10.6.0.9"}})
	p := process(io.Discard, "").Funcs()

	stdin := strings.Replace(string(f.conf("1.1.0", "")), `"name"`, `"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"net1"},{"containerID":"c2","ifname":"eth0"}],"name"`, 1)
	if err := p.GC(&cni.CmdArgs{StdinData: []byte(stdin)}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	var req api.GCRequest
	if !f.request(t, api.PathGC, &req) {
		t.Fatal("GC did not call ipamd")
	}
	want := api.GCRequest{Network: api.NetworkConfig{Name: "macvlan-net"}, ValidAttachments: []api.Attachment{{ContainerID: "c1", Interface: "net1"}, {ContainerID: "c2", Interface: "eth0"}}}
	if g, w := mustJSON(t, req), mustJSON(t, want); g != w {
		t.Errorf("GC request\n got %s\nwant %s", g, w)
	}

	g := startFakeIPAMD(t)
	g.answer(api.PathGC, 200, api.GCResponse{})
	err := p.GC(&cni.CmdArgs{StdinData: g.conf("1.1.0", "")})
	if cniCode(err) != types.ErrInvalidNetworkConfig || g.request(t, api.PathGC, &req) {
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
			f.answer(api.PathStatus, tt.status, tt.body)
			err := process(io.Discard, "").Funcs().Status(&cni.CmdArgs{StdinData: f.conf("1.1.0", `"default_ipv4_ippool":"v4"`)})
			if cniCode(err) != tt.wantCode || (tt.wantCode == 0) != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Fatalf("STATUS: %v, want code %d mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
			var req api.StatusRequest
			if !f.request(t, api.PathStatus, &req) || req.Network.Name != "macvlan-net" || len(req.Network.DefaultIPv4Pools) != 1 {
				t.Errorf("status request %+v", req)
			}
		})
	}
}

func TestLogFile(t *testing.T) {
	f := startFakeIPAMD(t)
	f.answer(api.PathRelease, 200, api.ReleaseResponse{Released: []string{"10.6.0.7"}})
	dir := t.TempDir()
	t.Setenv(EnvLogDir, dir)
	stdin := f.conf("1.1.0", `"log_file_path":"`+LogDir+`/sub/cni.log","log_level":"info"`)
	if err := process(io.Discard, NameSpiderpool).Funcs().Del(cmdArgs(stdin)); err != nil {
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
