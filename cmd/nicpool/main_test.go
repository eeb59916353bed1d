package main

import (
	"bytes"
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
