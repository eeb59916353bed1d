package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/operate/cli"
)

// completions runs `kubectl nicpool __complete args…` (what a shell's completion
// script runs) and returns the candidates it printed, without their descriptions,
// and the directive line.
func completions(t *testing.T, args ...string) (candidates []string, directive string) {
	t.Helper()
	out, errOut, code := kubectl(t, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d\n%s", args, code, errOut)
	}
	return parseCompletions(out)
}

func parseCompletions(out string) (candidates []string, directive string) {
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, ":") {
			directive = l
			continue
		}
		name, _, _ := strings.Cut(l, "\t")
		candidates = append(candidates, name)
	}
	return candidates, directive
}

func TestCompletion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "complete")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("complete-v4", "10.39.0.0/16", []string{"10.39.0.10-10.39.0.20"}))
	web := runPod(t, ns, "web-0", nic{name: "eth0", v4: "complete-v4"})
	runPod(t, ns, "db-0", nic{name: "eth0", v4: "complete-v4"})
	addr := endpointAddr(t, web, "eth0", 4)

	cmds, _ := completions(t, "")
	g.Expect(cmds).To(ContainElements("who", "pod", "pools", "check", "status", "release", "migrate", "version"))

	pods, directive := completions(t, "pod", "-n", ns, "")
	g.Expect(pods).To(ConsistOf("web-0", "db-0"))
	g.Expect(directive).To(Equal(":4"), "no file names")
	pods, _ = completions(t, "pod", "-n", ns, "we")
	g.Expect(pods).To(ConsistOf("web-0"))
	pods, _ = completions(t, "pod", ns+"/d")
	g.Expect(pods).To(ConsistOf(ns + "/db-0"))

	addrs, _ := completions(t, "who", "10.39.")
	g.Expect(addrs).To(HaveLen(2))
	g.Expect(addrs).To(ContainElement(addr))
	out, _, _ := kubectl(t, "__complete", "who", addr)
	g.Expect(out).To(ContainSubstring(addr + "\tcomplete-v4 " + ns + "/web-0 eth0"))
	addrs, _ = completions(t, "release", "10.39.")
	g.Expect(addrs).To(ContainElement(addr))
	addrs, _ = completions(t, "who", addr, "")
	g.Expect(addrs).To(BeEmpty(), "who takes one address")

	nss, _ := completions(t, "pod", "-n", "comp")
	g.Expect(nss).To(ConsistOf(ns))

	pools, _ := completions(t, "release", addr, "--pool", "complete-")
	g.Expect(pools).To(ConsistOf("complete-v4"))
	out, _, _ = kubectl(t, "__complete", "release", addr, "--pool", "complete-")
	g.Expect(out).To(ContainSubstring("complete-v4\t10.39.0.0/16"), "with its subnet")
}

// kubectl (1.26 and later) completes `kubectl nicpool <TAB>` by running
// kubectl_complete-nicpool from PATH: the plugin's binary under that name answers.
func TestCompletionShim(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-nicpool"), "./cmd/kubectl-nicpool")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	shim := filepath.Join(dir, cli.CompletionShim)
	g.Expect(os.Symlink("kubectl-nicpool", shim)).To(Succeed())
	out, err := exec.Command(shim, "--kubeconfig", env.Kubeconfig, "po").Output()
	g.Expect(err).NotTo(HaveOccurred())
	cands, directive := parseCompletions(string(out))
	g.Expect(cands).To(ConsistOf("pod", "pools"))
	g.Expect(directive).To(Equal(":4"))
}
