package suite

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// The README walks a user through the local cluster with kubectl. This spec runs
// those commands, in order, as the user would after `make up`, and checks that each
// succeeds and prints what the page shows, up to what differs between runs (UIDs,
// ages, the addresses other specs left taken, counts).
var _ = Describe("the README walkthrough", Ordered, func() {
	It("runs every local-cluster command of the documentation", NodeTimeout(20*time.Minute), func(ctx SpecContext) {
		root := testenv.RepoRoot()
		ensureKubectl(ctx)
		cmds, err := docs.Commands(root, docs.LocalCluster)
		Expect(err).NotTo(HaveOccurred())
		Expect(cmds).NotTo(BeEmpty())

		// What `make run` applies besides the pools and network the suite shares.
		created, err := stack.Apply(ctx, filepath.Join(root, "examples", local.ExampleStatefulSet))
		Expect(err).NotTo(HaveOccurred())
		Expect(created).NotTo(BeEmpty())
		DeferCleanup(func(ctx context.Context) {
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
			Expect(client.IgnoreNotFound(stack.Client.Delete(ctx, sts))).To(Succeed())
			Eventually(func() []corev1.Pod { return podsOf(ctx, "default", map[string]string{"app": "web"}) }).
				WithContext(ctx).Should(BeEmpty())
			// The garbage collector releases the StatefulSet's addresses and endpoints.
			checkInvariants(ctx)
		})
		runningPods(ctx, "default", map[string]string{"app": "web"}, 3)

		runPageCommands(ctx, cmds)
	})
})

// ensureKubectl builds bin/kubectl when it is missing: `make tools` builds it, but a
// checkout whose tools predate that has none.
func ensureKubectl(ctx context.Context) {
	GinkgoHelper()
	root := testenv.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "bin", "kubectl")); os.IsNotExist(err) {
		By("building bin/kubectl (hack/tools/build.sh kubectl)")
		build := exec.CommandContext(ctx, filepath.Join(root, "hack", "tools", "build.sh"), "kubectl")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
	}
}

// runPageCommands runs the commands of a page's blocks as a user would, on the local
// cluster with bin/ on PATH, and checks that each succeeds and prints every line the
// page shows for it (after normalise; a "..." line of the page stands for lines left
// out).
func runPageCommands(ctx context.Context, cmds []docs.Command, path ...string) {
	GinkgoHelper()
	root := testenv.RepoRoot()
	path = append(path, filepath.Join(root, "bin"), os.Getenv("PATH"))
	env := append(os.Environ(), "KUBECONFIG="+stack.AdminKubeconfig, "PATH="+strings.Join(path, ":"))
	for _, c := range cmds {
		if strings.HasPrefix(c.Line, "export ") {
			// The page points KUBECONFIG at the cluster; env already does.
			continue
		}
		By(c.Line)
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", c.Line)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		GinkgoWriter.Printf("$ %s\n%s", c.Line, out)
		Expect(err).NotTo(HaveOccurred(), "%s (%s)\n%s", c.Line, c.Where, out)
		got := normalise(strings.Split(strings.TrimRight(string(out), "\n"), "\n"))
		for _, want := range normalise(c.Output) {
			if want == "..." {
				continue
			}
			Expect(got).To(ContainElement(want), "%s (%s) printed:\n%s", c.Line, c.Where, out)
		}
	}
}

var (
	uuid = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// A container's or sandbox's ID as containerd makes it.
	containerID = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	// The suffix a controller gives its pods' names (nicpool-ipamd-x7k2p,
	// nicpool-webhook-d49cfcf6f-dnlqx), from the alphabet of Kubernetes' random names.
	generated = regexp.MustCompile(`-(?:[bcdfghjklmnpqrstvwxz2456789]{6,10}-)?[bcdfghjklmnpqrstvwxz2456789]{5}\b`)
	address   = regexp.MustCompile(`\b[0-9a-f]*[:.][0-9a-f:.]+(/[0-9]+)?\b`)
	// How often and over how long an Event was seen: (x4 over 2m3s).
	repeated = regexp.MustCompile(`\(x[0-9]+ over [^)]*\)`)
	// A count, or an age as kubectl prints it: 19s, 3m5s, 2d3h.
	number    = regexp.MustCompile(`\b(?:[0-9]+[smhdy])+\b|\b[0-9]+\b`)
	blankRuns = regexp.MustCompile(`\s+`)
)

// normalise keeps what a run of a page's commands shares with the page: names,
// columns, interfaces, pools and messages, not UIDs, container IDs, generated pod names, addresses, counts, ages or how
// often an Event repeated.
func normalise(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = uuid.ReplaceAllString(l, "UID")
		l = containerID.ReplaceAllString(l, "ID")
		l = generated.ReplaceAllString(l, "-GEN")
		l = repeated.ReplaceAllString(l, "")
		l = address.ReplaceAllString(l, "ADDR")
		l = number.ReplaceAllString(l, "N")
		l = strings.TrimSpace(blankRuns.ReplaceAllString(l, " "))
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
