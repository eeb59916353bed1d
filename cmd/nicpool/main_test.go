package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary is the plugin built once for this package's tests and benchmarks.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nicpool-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "nicpool")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(dir)
		panic("build nicpool: " + err.Error() + "\n" + string(out))
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

// TestVersion is what a runtime sees when it asks the plugin what it speaks.
func TestVersion(t *testing.T) {
	cmd := exec.Command(binary)
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("VERSION: %v", err)
	}
	want := `{"cniVersion":"1.1.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}`
	if got := string(bytes.TrimSpace(out)); got != want {
		t.Errorf("VERSION printed %s, want %s", got, want)
	}
}

// BenchmarkExecVersion measures what every CNI call pays before doing any work: exec,
// runtime start, package initialisation, and one small answer. It reports the binary's
// size beside it.
func BenchmarkExecVersion(b *testing.B) {
	st, err := os.Stat(binary)
	if err != nil {
		b.Fatal(err)
	}
	var user, sys float64
	for b.Loop() {
		cmd := exec.Command(binary)
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		user += cmd.ProcessState.UserTime().Seconds()
		sys += cmd.ProcessState.SystemTime().Seconds()
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "binary-MiB")
	b.ReportMetric((user+sys)*1e3/float64(b.N), "cpu-ms/exec")
}

// TestMalformedCallsGetCNIErrors: whatever a runtime or a user passes, the binary
// answers a CNI error on stdout and exits 1; it never dies with a Go panic.
func TestMalformedCallsGetCNIErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-ipamd.sock")
	good := `{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","ipam_unix_socket_path":"` + sock + `"}}`
	base := []string{"CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAMESPACE=a;K8S_POD_NAME=b"}
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
		{"DEL with ipamd absent", append([]string{"CNI_COMMAND=DEL"}, base...), good, 11},
		{"CHECK without prevResult", append([]string{"CNI_COMMAND=CHECK"}, base...), good, 7},
		{"GC without valid attachments", []string{"CNI_COMMAND=GC", "CNI_PATH=/opt/cni/bin"}, good, 7},
		{"STATUS with ipamd absent", []string{"CNI_COMMAND=STATUS", "CNI_PATH=/opt/cni/bin"}, good, 50},
		{"unknown command", []string{"CNI_COMMAND=FROB", "CNI_PATH=/opt/cni/bin"}, good, 4},
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
