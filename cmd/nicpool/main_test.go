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

// TestVersion is what a runtime sees when it asks the plugin what it speaks, under
// either of the names it is installed as.
func TestVersion(t *testing.T) {
	spiderpool := filepath.Join(t.TempDir(), "spiderpool")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spiderpool, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{binary, spiderpool} {
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
