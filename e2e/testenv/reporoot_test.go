package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// A command built as `make build` builds it (-trimpath: no source paths in the
// binary) still finds the checkout it runs in, from any folder of it: nicpool-local
// needs it to find bin/, examples/ and nicpool's sources (without them it would start
// the local cluster without nicpool).
func TestRepoRootOfATrimmedBinary(t *testing.T) {
	root := testenv.RepoRoot()
	bin := filepath.Join(t.TempDir(), "reporoot")
	// The flags of the Makefile's GO_BUILD, so that make build's cache serves it.
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./e2e/testenv/internal/reporoot")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -trimpath: %v\n%s", err, out)
	}
	for _, dir := range []string{root, filepath.Join(root, "docs"), filepath.Join(root, "e2e", "helm")} {
		run := exec.Command(bin)
		run.Dir = dir
		out, err := run.Output()
		if err != nil {
			t.Fatalf("in %s: %v", dir, err)
		}
		if got := strings.TrimSpace(string(out)); got != root {
			t.Errorf("run in %s: RepoRoot = %q, want %q", dir, got, root)
		}
	}
}
