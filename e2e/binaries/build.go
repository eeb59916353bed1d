package binaries

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/nicpool/nicpool/cniplugin/install"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// Set is where each of nicpool's binaries was built.
type Set struct {
	// Plugin is the CNI plugin (cmd/nicpool), Ipamd the node daemon, Webhook the
	// admission webhook and cluster controllers.
	Plugin, Ipamd, Webhook string
}

// Build compiles cmd/nicpool, cmd/nicpool-ipamd and cmd/nicpool-webhook from this
// checkout into dir, as `make build` does (static, trimmed, stripped): whatever is
// measured is the code beside the test, never a stale bin/, and built as shipped. A
// binary linked with cgo starts through the dynamic loader and libc, which costs a
// plugin run a few milliseconds the shipped plugin does not pay. The plugin is then
// installed into dir/cni-bin as `nicpool install` installs it on a node, and Plugin
// is that copy: executing the linker's output file itself costs more CPU per run on
// some machines (1.4–2.2 ms on the 2-core development VM), which no node pays.
func Build(dir string) (Set, error) {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+string(filepath.Separator), "./cmd/nicpool", "./cmd/nicpool-ipamd", "./cmd/nicpool-webhook")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return Set{}, fmt.Errorf("go build ./cmd/nicpool ./cmd/nicpool-ipamd ./cmd/nicpool-webhook: %w\n%s", err, out)
	}
	cniBin := filepath.Join(dir, "cni-bin")
	if err := os.MkdirAll(cniBin, 0o755); err != nil {
		return Set{}, err
	}
	if err := install.Install(filepath.Join(dir, "nicpool"), cniBin, "nicpool"); err != nil {
		return Set{}, err
	}
	return Set{
		Plugin:  filepath.Join(cniBin, "nicpool"),
		Ipamd:   filepath.Join(dir, "nicpool-ipamd"),
		Webhook: filepath.Join(dir, "nicpool-webhook"),
	}, nil
}
