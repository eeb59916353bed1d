package local

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Real nodes refuse to start, naming what to install, when bin/ lacks a node tool or
// the host lacks nft; with both present nothing is refused.
func TestNodePrerequisites(t *testing.T) {
	bin, path := t.TempDir(), t.TempDir()
	t.Setenv("PATH", path)
	for _, tool := range NodeTools[1:] {
		if err := os.WriteFile(filepath.Join(bin, tool), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string) {
		t.Helper()
		err := nodePrerequisites(bin)
		switch {
		case want == "" && err != nil:
			t.Fatalf("refused with everything present: %v", err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Fatalf("error %v; want one saying %q", err, want)
		}
	}
	check(NodeTools[0] + " missing in " + bin + ": run `make tools-node` first")
	if err := os.WriteFile(filepath.Join(bin, NodeTools[0]), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	check("install nftables")
	if err := os.WriteFile(filepath.Join(path, "nft"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("")
}

// Images and a registry are for real nodes: stand-ins refuse them before starting
// anything.
func TestStandInsRefuseImagesAndRegistry(t *testing.T) {
	for _, opts := range []Options{{Images: []string{"pause.tar"}}, {Registry: http.NotFoundHandler()}} {
		s, err := Up(context.Background(), opts)
		if err == nil || !strings.Contains(err.Error(), "for real nodes") {
			t.Errorf("Up(%+v): %v; want a refusal naming real nodes", opts, err)
		}
		if s != nil {
			t.Errorf("Up(%+v) started a stack", opts)
		}
	}
}
