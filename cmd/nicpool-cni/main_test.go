package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/cniplugin/install"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/server"
)

// The plugin pair built once for this package's tests and benchmarks, as `make
// build` builds it (static, no symbol table) and installed as the init container
// installs it (`nicpool-cni install`, run from the built Go plugin), so that the
// benchmarks measure the binaries nodes run: binary is the front a runtime execs,
// installed as nicpool, goBinary the Go plugin beside it.
var binary, goBinary string

// builtDir holds the pair as `make build` leaves it in bin/.
var builtDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nicpool-bin-")
	if err != nil {
		panic(err)
	}
	builtDir = dir
	binary, goBinary, err = buildInstalled(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestNoKubernetesInImportGraph keeps the binary small and quick to start: the runtime
// execs it for every CNI call, and client-go alone would multiply its size and its
// package initialisation (design.md, "Performance goals").
func TestNoKubernetesInImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "google.golang.org/grpc", "google.golang.org/protobuf"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("the plugin imports %s: keep Kubernetes and gRPC out of the CNI binary", pkg)
			}
		}
	}
}

// buildInstalled builds the pair into dir and installs it into dir/bin by running
// `nicpool-cni install --dir=dir/bin` (the default name) from the build output, and
// returns the installed front and Go plugin. Executing the linker's output itself
// costs more on some machines than executing a copy of it (1.4–2.2 ms of CPU per run
// on the 2-core development VM, the same page faults at a higher cost), which no
// node pays.
func buildInstalled(dir string) (front, goPlugin string, err error) {
	built, err := binaries.BuildPlugin(dir)
	if err != nil {
		return "", "", err
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", "", err
	}
	if out, err := exec.Command(built, "install", "--dir="+bin).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("nicpool-cni install: %w\n%s", err, out)
	}
	return filepath.Join(bin, install.Front), filepath.Join(bin, install.GoPlugin), nil
}

// The init container's command with no name installs the pair: the Go plugin as
// nicpool-cni and the front as nicpool, and says so.
func TestInstallDefaultsToThePair(t *testing.T) {
	bin := t.TempDir()
	out, err := exec.Command(filepath.Join(builtDir, install.GoPlugin), "install", "--dir="+bin).CombinedOutput()
	if err != nil {
		t.Fatalf("nicpool-cni install: %v\n%s", err, out)
	}
	for _, n := range []string{"nicpool", "nicpool-cni"} {
		want, _ := os.ReadFile(filepath.Join(builtDir, n))
		got, err := os.ReadFile(filepath.Join(bin, n))
		if err != nil || len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("%s was not installed as built (%v)", n, err)
		}
		if !strings.Contains(string(out), "installed "+filepath.Join(bin, n)) {
			t.Errorf("the installer does not say it installed %s: %s", n, out)
		}
	}
	if es, _ := os.ReadDir(bin); len(es) != 2 {
		t.Errorf("the directory holds %d files, want the pair", len(es))
	}
}

// TestFrontStartsWithoutALoader: the front, built as `make build` builds it, is an
// executable the kernel runs as linked: static (no interpreter), not position
// independent (a static PIE relocates itself at every exec, work no call needs; the
// images have no loader to run a dynamic one), with no dynamic section. A compiler
// that made anything else of FRONT_CC and FRONT_CFLAGS would give a front that pays
// for it, or crashes, on every CNI call.
func TestFrontStartsWithoutALoader(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		t.Errorf("the front is %v, want a static executable (%v)", f.Type, elf.ET_EXEC)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the front has a %v segment: it must start without a dynamic loader or relocations", p.Type)
		}
	}
}

// TestVersion is what a runtime sees when it asks the plugin what it speaks, under
// either of the names the front is installed as (the front hands VERSION to the Go
// plugin), and from the Go plugin itself.
func TestVersion(t *testing.T) {
	dir := t.TempDir()
	if err := install.Install(goBinary, dir, "nicpool", "spiderpool"); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{binary, filepath.Join(dir, "spiderpool"), goBinary} {
		cmd := exec.Command(bin)
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("VERSION as %s: %v", filepath.Base(bin), err)
		}
		want := `{"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}`
		if got := string(bytes.TrimSpace(out)); got != want {
			t.Errorf("VERSION as %s printed %s, want %s", filepath.Base(bin), got, want)
		}
	}
}

// BenchmarkExecVersion measures what a CNI call the front hands to the Go plugin pays
// before doing any work: the front's exec, its exec of nicpool-cni, the Go runtime's
// start, package initialisation, and one small answer. It reports the front's size
// beside it.
func BenchmarkExecVersion(b *testing.B) {
	benchmarkExec(b, binary, []string{"CNI_COMMAND=VERSION"}, `{"cniVersion":"1.1.0"}`, func(out []byte) bool {
		return bytes.Contains(out, []byte("supportedVersions"))
	})
}

// BenchmarkExecGo measures a Go program that does nothing, built and run as the Go
// plugin is: the part of every exec of nicpool-cni that any Go binary pays on this
// machine (exec, the runtime's start, its threads and first page faults), which the Go
// plugin's code cannot lower, and which the front saves every call ipamd serves.
// BenchmarkExecVersion and BenchmarkExecAddHandedOff report the Go plugin's calls
// above it, BenchmarkExecAdd a call the front carries alone.
func BenchmarkExecGo(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module empty\n\ngo 1.26\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "empty.built"), ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	// Run from a copy written through the file system, as the plugin is installed.
	data, err := os.ReadFile(filepath.Join(dir, "empty.built"))
	if err != nil {
		b.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, data, 0o755); err != nil {
		b.Fatal(err)
	}
	benchmarkExec(b, empty, nil, "", func([]byte) bool { return true })
}

// BenchmarkExecAdd measures one CNI ADD as the runtime makes it on a node, one process
// per call: the front posts the call to ipamd, which runs the plugin's code for it
// (here a stand-in ipamd that runs the plugin's library (server.ServeFrame) with an allocator that
// answers at once, so that the figures are the front's own: CPU and page faults per
// exec, and its size). With NICPOOL_BENCH_FRONT_BASELINE naming another build of the
// front (an earlier commit's, say), it measures that build and this checkout's back to
// back in one run, as the sub-benchmarks front=baseline and front=built.
func BenchmarkExecAdd(b *testing.B) {
	baseline := os.Getenv("NICPOOL_BENCH_FRONT_BASELINE")
	if baseline == "" {
		benchmarkAdd(b, binary, serveAdd(b))
		return
	}
	// Installed beside nicpool-cni as the built front is, for the same reasons.
	data, err := os.ReadFile(baseline)
	if err != nil {
		b.Fatal(err)
	}
	copied := filepath.Join(filepath.Dir(binary), "nicpool-baseline")
	if err := os.WriteFile(copied, data, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.Remove(copied) })
	for _, f := range []struct{ name, path string }{{"front=baseline", copied}, {"front=built", binary}} {
		b.Run(f.name, func(b *testing.B) { benchmarkAdd(b, f.path, serveAdd(b)) })
	}
}

// serveAdd is the stand-in ipamd's answer to the front's POST /v1/cni.
func serveAdd(b *testing.B) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			b.Errorf("read the front's frame: %v", err)
			return
		}
		f, err := api.DecodeFrame(body)
		if err != nil {
			b.Errorf("the front's frame: %v", err)
			http.Error(w, err.Error(), api.StatusHandBack)
			return
		}
		a, handOff := server.ServeFrame(r.Context(), f, instantIPAMD{})
		if handOff != nil {
			b.Errorf("the stand-in ipamd handed the ADD to nicpool-cni (%v): this would measure nicpool-cni, not the front", handOff)
			http.Error(w, handOff.Error(), api.StatusHandBack)
			return
		}
		server.WriteAnswer(w, a)
	}
}

// instantIPAMD allocates the stand-in's address at once; ADD asks nothing else.
type instantIPAMD struct{ cni.IPAMD }

func (instantIPAMD) Allocate(context.Context, *api.AllocateRequest) (*api.AllocateResponse, error) {
	var resp api.AllocateResponse
	err := json.Unmarshal([]byte(allocated), &resp)
	return &resp, err
}

// BenchmarkExecAddHandedOff measures one CNI ADD as the runtime makes it, one process
// per call, when ipamd hands the front's call back (as it does for a configuration over
// its bound or naming log_file_path): the front's exec, its POST, and the Go plugin's
// whole call after it, which sends ipamd the trimmed configuration (CPU, page faults),
// the cost of every call before the front.
// With NICPOOL_BENCH_GO_BASELINE naming another build of nicpool-cni, it measures that
// build (installed beside this checkout's front) and this checkout's back to back in
// one run, as the sub-benchmarks go=baseline and go=built.
func BenchmarkExecAddHandedOff(b *testing.B) {
	baseline := os.Getenv("NICPOOL_BENCH_GO_BASELINE")
	if baseline == "" {
		benchmarkAdd(b, binary, handBackFront(b))
		return
	}
	dir := b.TempDir()
	for _, c := range []struct{ from, to string }{{binary, install.Front}, {baseline, install.GoPlugin}} {
		data, err := os.ReadFile(c.from)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.to), data, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []struct{ name, path string }{{"go=baseline", filepath.Join(dir, install.Front)}, {"go=built", binary}} {
		b.Run(f.name, func(b *testing.B) { benchmarkAdd(b, f.path, handBackFront(b)) })
	}
}

// handBackFront hands back the front's frame, whose configuration is the runtime's
// (it names the main plugin's "master"), and serves nicpool-cni's, which carries only
// what ADD reads.
func handBackFront(b *testing.B) http.HandlerFunc {
	serve := serveAdd(b)
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"master"`)) {
			http.Error(w, "handed back", api.StatusHandBack)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		serve(w, r)
	}
}

// benchmarkAdd runs one CNI ADD per iteration, as the runtime makes it, against a
// stand-in ipamd that answers at once: cni serves POST /v1/cni, any other path is an
// allocation (the JSON request of an earlier build of nicpool-cni). Whatever the plugin costs per pod
// interface is CPU the pods' other work does not get on a busy node. CNI_NETNS names
// a file that exists, as a sandbox's namespace does on a node, so that ADD checks it
// as there. It asserts only that each ADD printed its address.
func benchmarkAdd(b *testing.B, front string, cni http.HandlerFunc) {
	run := b.TempDir()
	netns := filepath.Join(run, "netns")
	if err := os.WriteFile(netns, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(run, "ipamd.sock"))
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cni" {
			cni(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, allocated)
	})}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=" + netns, "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin",
		"CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=u1", "NICPOOL_CNI_RUN_DIR=" + run}
	conf := `{"cniVersion":"1.1.0","name":"bench","type":"macvlan","master":"eth0","ipam":{"type":"nicpool","ipam_unix_socket_path":"/run/nicpool/ipamd.sock","request_timeout":"2m0s"}}`
	benchmarkExec(b, front, env, conf, func(out []byte) bool { return bytes.Contains(out, []byte(`"10.6.0.7/16"`)) })
}

// allocated is the stand-in ipamd's answer to every allocation.
const allocated = `{"interface":"eth0","ips":[{"address":"10.6.0.7/16","gateway":"10.6.0.1","pool":"default-v4"}]}`

// benchmarkExec runs the program bin once per iteration and reports its CPU time, its
// page faults and its binary's size; ok checks each run's stdout.
func benchmarkExec(b *testing.B, bin string, env []string, stdin string, ok func(stdout []byte) bool) {
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	var faults int64
	for b.Loop() {
		cmd := exec.Command(bin)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || !ok(stdout.Bytes()) {
			b.Fatalf("%s: %v: %s%s", filepath.Base(bin), err, stdout.String(), stderr.String())
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			faults += ru.Minflt + ru.Majflt
		}
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "binary-MiB")
	b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/exec")
	b.ReportMetric(float64(faults)/float64(b.N), "faults/exec")
}

// TestMalformedCallsGetCNIErrors: whatever a runtime or a user passes, the binary
// answers a CNI error on stdout and exits 1; it never dies with a Go panic.
func TestMalformedCallsGetCNIErrors(t *testing.T) {
	// The run directory is empty: no ipamd on this "node".
	run := "NICPOOL_CNI_RUN_DIR=" + t.TempDir()
	good := `{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","ipam_unix_socket_path":"/run/nicpool/ipamd.sock","request_timeout":1}}`
	base := []string{run, "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAMESPACE=a;K8S_POD_NAME=b"}
	tests := []struct {
		name  string
		env   []string
		stdin string
		code  uint
	}{
		{"ADD with garbage stdin", append([]string{"CNI_COMMAND=ADD"}, base...), "\x00\xff{", 6},
		{"ADD with empty stdin", append([]string{"CNI_COMMAND=ADD"}, base...), "", 6},
		{"ADD with an unsupported version", append([]string{"CNI_COMMAND=ADD"}, base...), strings.Replace(good, "1.1.0", "0.2.0", 1), 1},
		{"ADD without an ipam section", append([]string{"CNI_COMMAND=ADD"}, base...), `{"cniVersion":"1.1.0","name":"n"}`, 7},
		{"ADD without CNI_IFNAME", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_PATH=/opt/cni/bin"}, good, 4},
		{"ADD with CNI_ARGS that are not KEY=VALUE", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=;;=;x"}, good, 4},
		{"ADD with ipamd absent", append([]string{"CNI_COMMAND=ADD"}, base...), good, 11},
		{"ADD with a socket outside /run/nicpool", append([]string{"CNI_COMMAND=ADD"}, base...), strings.Replace(good, "/run/nicpool/", "/var/run/docker/", 1), 7},
		{"ADD with a log file outside /var/log/nicpool", append([]string{"CNI_COMMAND=ADD"}, base...), strings.Replace(good, `"type"`, `"log_file_path":"/etc/cron.d/x","type"`, 1), 7},
		{"CHECK without prevResult", append([]string{"CNI_COMMAND=CHECK"}, base...), good, 7},
		{"GC without valid attachments", []string{run, "CNI_COMMAND=GC", "CNI_PATH=/opt/cni/bin"}, good, 7},
		{"STATUS with ipamd absent", []string{run, "CNI_COMMAND=STATUS", "CNI_PATH=/opt/cni/bin"}, good, 50},
		{"unknown command", []string{run, "CNI_COMMAND=FROB", "CNI_PATH=/opt/cni/bin"}, good, 4},
		{"ADD with a container ID of other characters", []string{run, "CNI_COMMAND=ADD", "CNI_CONTAINERID=../c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin"}, good, 4},
		{"ADD with an interface name over 15 bytes", []string{run, "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1234567890abc", "CNI_PATH=/opt/cni/bin"}, good, 4},
		{"DEL with an interface name holding a slash", []string{run, "CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_IFNAME=a/b", "CNI_PATH=/opt/cni/bin"}, good, 4},
		{"ADD with a network name of other characters", append([]string{"CNI_COMMAND=ADD"}, base...), strings.Replace(good, `"name":"n"`, `"name":"n/../x"`, 1), 7},
		{"ADD with a cniVersion that is not a string", append([]string{"CNI_COMMAND=ADD"}, base...), strings.Replace(good, `"1.1.0"`, `1`, 1), 6},
		{"CHECK in a version without CHECK", append([]string{"CNI_COMMAND=CHECK"}, base...), strings.Replace(good, "1.1.0", "0.3.1", 1), 1},
		{"STATUS in a version without STATUS", []string{run, "CNI_COMMAND=STATUS", "CNI_PATH=/opt/cni/bin"}, strings.Replace(good, "1.1.0", "1.0.0", 1), 1},
		{"DEL in the plugin's own network namespace", []string{run, "CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin"}, good, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary)
			cmd.Env = tt.env
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1", err)
			}
			if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "goroutine ") {
				t.Fatalf("the plugin panicked: %s", stderr.String())
			}
			var e struct {
				Code uint   `json:"code"`
				Msg  string `json:"msg"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &e); err != nil {
				t.Fatalf("stdout is not a CNI error: %v: %q", err, stdout.String())
			}
			if e.Code != tt.code || e.Msg == "" {
				t.Errorf("error %+v, want code %d with a message", e, tt.code)
			}
		})
	}
}

// TestAbout: run by hand without CNI_COMMAND, the plugin says what it is and which
// CNI versions it speaks, on stderr, and exits 0.
func TestAbout(t *testing.T) {
	cmd := exec.Command(binary)
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "nicpool CNI IPAM plugin") || !strings.Contains(stderr.String(), "CNI protocol versions supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestDelWithIPAMDAbsent: a pod deleted while its node has no ipamd (a rollout, an
// uninstall) is let go: DEL exits 0 with nothing on stdout, and says on stderr that
// the release is left to the garbage collector.
func TestDelWithIPAMDAbsent(t *testing.T) {
	cmd := exec.Command(binary)
	cmd.Env = []string{"NICPOOL_CNI_RUN_DIR=" + t.TempDir(), "CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAMESPACE=a;K8S_POD_NAME=b"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","request_timeout":1}}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("DEL: %v: %s%s", err, stdout.String(), stderr.String())
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "garbage collector") || !strings.Contains(stderr.String(), `"pod":"a/b"`) {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestDelWithIPAMDNotAnswering: a pod deleted while its node's ipamd accepts
// connections and answers nothing (stopped, deadlocked) is let go as when ipamd is
// absent, within DelWait and not request_timeout: through the front (which waits for
// its own DEL wait, then hands off) and through nicpool-cni alone, DEL exits 0 and
// says the release is left to the garbage collector. A DEL that waited a minute of
// request_timeout would outlast the kubelet's bound on many interfaces.
func TestDelWithIPAMDNotAnswering(t *testing.T) {
	run := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(run, "ipamd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; _ = c.Close() }()
		}
	}()
	defer func() { close(done); _ = l.Close() }()
	for _, bin := range []string{binary, goBinary} {
		t.Run(filepath.Base(bin), func(t *testing.T) {
			// DelWait is 5 s (twice through the front); a DEL still running after 40 s
			// waits for request_timeout.
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = []string{"NICPOOL_CNI_RUN_DIR=" + run, "CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAMESPACE=a;K8S_POD_NAME=b"}
			cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","request_timeout":"1m"}}`)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("DEL did not end within 40 s: %s%s", stdout.String(), stderr.String())
			}
			if err != nil {
				t.Fatalf("DEL: %v: %s%s", err, stdout.String(), stderr.String())
			}
			if stdout.Len() != 0 || !strings.Contains(stderr.String(), "garbage collector") || !strings.Contains(stderr.String(), `"pod":"a/b"`) {
				t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
			}
		})
	}
}
