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

// versionsOf runs `kubectl nicpool version -o json`, built as make build builds it
// (stamped with the version the stack's binaries carry), and returns what it found and
// what it printed on standard error.
func versionsOf(ctx SpecContext) (map[string]inspect.ComponentVersions, string) {
	GinkgoHelper()
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
	var list struct {
		Items []struct{ Status inspect.ComponentVersions }
	}
	Expect(json.Unmarshal(stdout.Bytes(), &list)).To(Succeed(), stdout.String())
	found := map[string]inspect.ComponentVersions{}
	for _, it := range list.Items {
		found[it.Status.Component] = it.Status
	}
	return found, stderr.String()
}

// Stand-ins only: there the webhook and ipamd are processes, not pods, so only what
// they report themselves tells their versions.
var _ = describeFor(local.NodeStandIn, "kubectl nicpool version", func() {
	It("names the version of the webhook the API server calls and of every node's ipamd, the plugin's own, without a skew warning", func(ctx SpecContext) {
		found, stderr := versionsOf(ctx)
		Expect(stderr).NotTo(ContainSubstring("version skew"))
		want := binaries.Version()
		Expect(found[inspect.VersionClient].Running).To(ConsistOf(HaveField("Version", want)))
		Expect(found[inspect.VersionWebhook].Running).To(ConsistOf(And(
			HaveField("Version", want), HaveField("Revision", binaries.Revision()), HaveField("Source", inspect.SourceAdmission))))
		var nodes []string
		for _, n := range stack.Nodes {
			nodes = append(nodes, n.Name())
		}
		Expect(found[inspect.VersionIpamd].Running).To(ConsistOf(And(
			HaveField("Version", version.Label(want)), HaveField("Source", inspect.SourceHeartbeat), HaveField("Nodes", ConsistOf(nodes)))))
	})
})

// Real nodes run nicpool from the images `make` built and tagged with the version their
// binaries carry: the images' tags and what the binaries report agree, so a fresh
// cluster shows no skew.
var _ = describeFor(local.NodeKubelet, "kubectl nicpool version", func() {
	It("finds the images of the webhook, ipamd and CNI plugin tagged with the version the binaries in them report, without a skew warning", func(ctx SpecContext) {
		found, stderr := versionsOf(ctx)
		Expect(stderr).NotTo(ContainSubstring("version skew"))
		want := binaries.Version()
		Expect(found[inspect.VersionWebhook].Running).To(ConsistOf(And(HaveField("Version", want), HaveField("Source", inspect.SourceAdmission))))
		Expect(found[inspect.VersionIpamd].Running).To(ConsistOf(And(HaveField("Version", version.Label(want)), HaveField("Source", inspect.SourceHeartbeat))))
		for _, c := range []string{inspect.VersionWebhook, inspect.VersionIpamd, inspect.VersionCNI} {
			Expect(found[c].Images).To(ConsistOf(HaveField("Version", want)), "%s's images", c)
		}
	})
})
