package binaries

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/nicpool/nicpool/cniplugin/install"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// Set is where each of nicpool's binaries was built.
type Set struct {
	// Plugin is the CNI plugin as a runtime executes it: the C front
	// (cniplugin/front), installed as nicpool; GoPlugin is the Go plugin
	// (cmd/nicpool-cni) installed beside it, which the front execs for what it does
	// not serve itself. Ipamd is the node daemon, Webhook the admission webhook and
	// cluster controllers.
	Plugin, GoPlugin, Ipamd, Webhook string
}

// Build compiles the CNI plugin pair, cmd/nicpool-ipamd and cmd/nicpool-webhook from
// this checkout into dir, as `make build` does (static, trimmed, stripped): whatever
// is measured is the code beside the test, never a stale bin/, and built as shipped. A
// binary linked with cgo starts through the dynamic loader and libc, which costs a
// plugin run a few milliseconds the shipped plugin does not pay. The pair is then
// installed into dir/cni-bin as `nicpool-cni install` installs it on a node, and
// Plugin is that copy of the front: executing the linker's output file itself costs
// more CPU per run on some machines (1.4–2.2 ms on the 2-core development VM), which
// no node pays.
func Build(dir string) (Set, error) {
	if err := goBuild(dir, "./cmd/nicpool-ipamd", "./cmd/nicpool-webhook"); err != nil {
		return Set{}, err
	}
	plugin, err := InstallPlugin(dir, filepath.Join(dir, "cni-bin"), install.Front)
	if err != nil {
		return Set{}, err
	}
	return Set{
		Plugin:   plugin,
		GoPlugin: filepath.Join(dir, "cni-bin", install.GoPlugin),
		Ipamd:    filepath.Join(dir, "nicpool-ipamd"),
		Webhook:  filepath.Join(dir, "nicpool-webhook"),
	}, nil
}

// FrontSource is the C front's one source file, FrontCC and FrontCFlags how `make
// build` compiles it (the Makefile's FRONT_CC and FRONT_CFLAGS;
// manifests/dockerfile_test.go keeps the Makefile, build/nicpool.Dockerfile and these
// equal): static against musl and not position independent, because the images have
// no C library and every CNI call pays the front's start-up.
const FrontSource = "cniplugin/front/nicpool.c"

// FrontCC is the C compiler of the front for the host: Debian's musl-gcc (musl-tools;
// `make front-deps` installs it).
const FrontCC = "musl-gcc"

// FrontCFlags are the C compiler's flags for the front.
var FrontCFlags = []string{"-static", "-no-pie", "-s", "-O2", "-Wall", "-Wextra", "-Werror"}

// BuildPlugin builds the CNI plugin pair from this checkout into dir as `make build`
// does: dir/nicpool-cni, the Go plugin, and dir/nicpool, its front, compiled with
// FrontCC. It returns the Go plugin's path, what install.Install takes.
func BuildPlugin(dir string) (string, error) {
	return BuildPluginFrom(Checkout{}, dir)
}

// Checkout is a source tree of nicpool the binaries are built from: this one when
// Root is empty, else another (an earlier commit's, say), stamped with its own
// Version and Revision.
type Checkout struct {
	Root, Version, Revision string
}

func (c Checkout) root() string {
	if c.Root == "" {
		return testenv.RepoRoot()
	}
	return c.Root
}

func (c Checkout) ldflags() string {
	if c.Root == "" {
		return LDFlags()
	}
	return "-s -w -X " + VersionPackage + ".version=" + c.Version + " -X " + VersionPackage + ".revision=" + c.Revision
}

// BuildPluginFrom is BuildPlugin of checkout c.
func BuildPluginFrom(c Checkout, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := GoBuild(c, dir, "./cmd/"+install.GoPlugin); err != nil {
		return "", err
	}
	if err := buildFront(c, FrontCC, filepath.Join(dir, install.Front)); err != nil {
		return "", err
	}
	return filepath.Join(dir, install.GoPlugin), nil
}

// BuildFront compiles the front of this checkout into out with the C compiler cc and
// FrontCFlags: FrontCC for the host, <triple>-linux-musl-gcc for another platform.
func BuildFront(cc, out string) error { return buildFront(Checkout{}, cc, out) }

func buildFront(c Checkout, cc, out string) error {
	cmd := exec.Command(cc, slices.Concat(FrontCFlags, []string{"-o", out, FrontSource})...)
	cmd.Dir = c.root()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s(the front needs Debian's musl: `make front-deps` installs it, or hack/front/deps.sh names the packages)", cmd, err, b)
	}
	return nil
}

// InstallPlugin builds the plugin pair into dir (BuildPlugin) and installs it into
// cniBin as the ipamd DaemonSet's init container does on a node: nicpool-cni, then
// the front as each of names. It returns the front installed as names[0].
func InstallPlugin(dir, cniBin string, names ...string) (string, error) {
	goPlugin, err := BuildPlugin(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cniBin, 0o755); err != nil {
		return "", err
	}
	if err := install.Install(goPlugin, cniBin, names...); err != nil {
		return "", err
	}
	return filepath.Join(cniBin, names[0]), nil
}

// goBuild builds the Go packages pkgs of this checkout into dir as the Makefile's
// GO_BUILD does, with the version stamped as Version and Revision say.
func goBuild(dir string, pkgs ...string) error { return GoBuild(Checkout{}, dir, pkgs...) }

// GoBuild builds the Go packages pkgs of checkout c into dir as the Makefile's
// GO_BUILD does, stamped with c's version.
func GoBuild(c Checkout, dir string, pkgs ...string) error {
	cmd := exec.Command("go", slices.Concat([]string{"build", "-trimpath", "-ldflags=" + c.ldflags(), "-o", dir + string(filepath.Separator)}, pkgs)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = c.root()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	return nil
}

// VersionPackage is where the linker stamps the version (the Makefile's VERSION_PKG).
const VersionPackage = "github.com/nicpool/nicpool/version"

var stamp = sync.OnceValues(func() (string, string) {
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	v, r := git("describe", "--tags", "--always", "--dirty"), git("rev-parse", "HEAD")
	if v == "" {
		v = "dev"
	}
	if r == "" {
		r = "unknown"
	}
	return v, r
})

// Version is the version the binaries of Build are stamped with: the Makefile's
// default, `git describe --tags --always --dirty` of this checkout ("dev" outside
// git).
func Version() string { v, _ := stamp(); return v }

// Revision is the git commit the binaries of Build are stamped with.
func Revision() string { _, r := stamp(); return r }

// LDFlags are the linker flags of the Makefile's GO_LDFLAGS for Version and Revision.
func LDFlags() string {
	return "-s -w -X " + VersionPackage + ".version=" + Version() + " -X " + VersionPackage + ".revision=" + Revision()
}
