package suite

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/version"
)

// Stand-ins only: there the webhook and ipamd are processes, not pods, so only what
// they report themselves tells their versions.
var _ = describeFor(local.NodeStandIn, "kubectl nicpool version", func() {
	It("names the version of the webhook the API server calls and of every node's ipamd, the plugin's own, without a skew warning", func(ctx SpecContext) {
		// Built as make build builds it, stamped with the version the stack's
		// binaries carry.
		dir := GinkgoT().TempDir()
		plugin := filepath.Join(dir, "kubectl-nicpool")
		build := exec.CommandContext(ctx, "go", "build", "-ldflags="+binaries.LDFlags(), "-o", plugin, "./cmd/kubectl-nicpool")
		build.Dir = testenv.RepoRoot()
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)

		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, plugin, "--kubeconfig", stack.AdminKubeconfig, "version", "-o", "json")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		Expect(cmd.Run()).To(Succeed(), stderr.String())
		Expect(stderr.String()).NotTo(ContainSubstring("version skew"))
		var list struct {
			Items []struct{ Status inspect.ComponentVersions }
		}
		Expect(json.Unmarshal(stdout.Bytes(), &list)).To(Succeed(), stdout.String())
		running := map[string][]inspect.RunningVersion{}
		for _, it := range list.Items {
			running[it.Status.Component] = it.Status.Running
		}
		want := binaries.Version()
		Expect(running[inspect.VersionClient]).To(ConsistOf(HaveField("Version", want)))
		Expect(running[inspect.VersionWebhook]).To(ConsistOf(And(
			HaveField("Version", want), HaveField("Revision", binaries.Revision()), HaveField("Source", inspect.SourceAdmission))))
		var nodes []string
		for _, n := range stack.Nodes {
			nodes = append(nodes, n.Name())
		}
		Expect(running[inspect.VersionIpamd]).To(ConsistOf(And(
			HaveField("Version", version.Label(want)), HaveField("Source", inspect.SourceHeartbeat), HaveField("Nodes", ConsistOf(nodes)))))
	})
})
