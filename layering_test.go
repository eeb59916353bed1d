// The layering of nicpool's components, checked on the import graph: the API and
// annotation contract (crds/) depends on no component, the node daemon (ipamd/) on no
// cluster-side component, and the CNI plugin only on ipamd's socket API, so that it
// stays small and starts fast on every CNI call. The plugin's logic is a library
// (cniplugin/cni) that nicpool-cni's process (cniplugin, cmd/nicpool-cni) and ipamd
// both call, as multus's shim and daemon both call pkg/multus: ipamd may link the
// library, never the process.
package nicpool_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/nicpool/nicpool/"

// layers names, for each room, the rooms of this module its packages may depend on
// (directly or not). A room is a package path below the module, and covers the
// packages below it.
var layers = []struct {
	room    string
	mayUse  []string
	because string
}{
	{"crds", []string{"crds"}, "the API types and the annotation contract are shared by every component"},
	{"version", []string{"version"}, "every binary reports its build, so the version depends on no component"},
	{"ipamd", []string{"crds", "ipamd", "cniplugin/cni", "version"}, "the node daemon must not link the admission webhook, the cluster controllers or the CNI plugin's process (it serves calls of the plugin's front with the plugin's library, cniplugin/cni)"},
	{"cniplugin/cni", []string{"cniplugin/cni", "ipamd/api"}, "the CNI plugin's library knows the CNI protocol and ipamd's API, and nothing of the process or the daemon that runs it"},
	{"cniplugin", []string{"cniplugin", "ipamd/api", "version"}, "the CNI plugin talks to ipamd through its socket API only"},
	{"cmd/nicpool-cni", []string{"cniplugin", "ipamd/api", "version"}, "the CNI plugin talks to ipamd through its socket API only"},
}

// testEnvironment is what only tests, the end-to-end stacks and the local-cluster
// command may link: it starts control planes and node stand-ins.
var testEnvironment = []string{"e2e"}

// allowedTestEnvironmentUsers are the non-test packages outside e2e/ that run a
// local cluster on purpose.
var allowedTestEnvironmentUsers = []string{"cmd/nicpool-local"}

func within(pkg, room string) bool {
	return pkg == room || strings.HasPrefix(pkg, room+"/")
}

func withinAny(pkg string, rooms []string) bool {
	for _, r := range rooms {
		if within(pkg, r) {
			return true
		}
	}
	return false
}

// moduleDeps maps every package of the module (path below the module) to the module
// packages it depends on, tests excluded.
func moduleDeps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], module) {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		deps[pkg] = nil
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, module) {
				deps[pkg] = append(deps[pkg], strings.TrimPrefix(d, module))
			}
		}
	}
	if len(deps) == 0 {
		t.Fatal("go list ./... listed no package of the module")
	}
	return deps
}

func TestLayering(t *testing.T) {
	deps := moduleDeps(t)
	for _, l := range layers {
		seen := false
		for pkg, ds := range deps {
			if !within(pkg, l.room) {
				continue
			}
			seen = true
			for _, d := range ds {
				if !withinAny(d, l.mayUse) {
					t.Errorf("%s depends on %s: %s may use only %v (%s)", pkg, d, l.room, l.mayUse, l.because)
				}
			}
		}
		if !seen {
			t.Errorf("no package in %s: update the layering rules", l.room)
		}
	}
}

// processImports are the packages through which a program reaches its process: its
// standard streams, environment, files and system calls.
var processImports = []string{"os", "os/exec", "os/signal", "syscall", "golang.org/x/sys/unix"}

// TestCNILibraryIsGivenItsProcess: the plugin's library imports nothing that reaches
// a process of its own, so that ipamd, which serves the front's calls with it, gets no
// code that writes the daemon's stdout, reads its environment or opens host files on
// a network configuration's say: every such dependency is a field of cni.Plugin.
func TestCNILibraryIsGivenItsProcess(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./cniplugin/cni").Output()
	if err != nil {
		t.Fatalf("go list ./cniplugin/cni: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		t.Fatal("go list listed no library")
	}
	for _, imp := range fields[1:] {
		for _, banned := range processImports {
			if imp == banned {
				t.Errorf("%s imports %s: the library is given its process (cni.Plugin's fields), it does not reach one", fields[0], imp)
			}
		}
	}
}

// TestOnlyTestsStartTheTestEnvironment keeps the control-plane and node stand-in code
// out of everything nicpool ships.
func TestOnlyTestsStartTheTestEnvironment(t *testing.T) {
	for pkg, ds := range moduleDeps(t) {
		if withinAny(pkg, testEnvironment) || withinAny(pkg, allowedTestEnvironmentUsers) {
			continue
		}
		for _, d := range ds {
			if withinAny(d, testEnvironment) {
				t.Errorf("%s depends on %s: only tests, e2e/ and %v may link the test environment", pkg, d, allowedTestEnvironmentUsers)
			}
		}
	}
}
