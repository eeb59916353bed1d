package suite

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/operate/inspect"
)

// Stand-ins only: the spec stops the local webhook and ipamd processes.
var _ = describeFor(local.NodeStandIn, "kubectl nicpool status", Serial, func() {
	It("passes on the running stack, names the webhook while it is stopped, and the node whose ipamd is stopped", func(ctx SpecContext) {
		plugin := filepath.Join(kubectlNicpool(ctx), "kubectl-nicpool")
		status := func(ctx context.Context) (text string, problems map[string]inspect.Check, code int) {
			run := func(args ...string) (string, int) {
				cmd := exec.CommandContext(ctx, plugin, append([]string{"--kubeconfig", stack.AdminKubeconfig, "status"}, args...)...)
				out, err := cmd.Output()
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					return string(out), exit.ExitCode()
				}
				Expect(err).NotTo(HaveOccurred())
				return string(out), 0
			}
			text, code = run()
			js, _ := run("-o", "json")
			var list struct {
				Items []struct{ Status inspect.Check }
			}
			Expect(json.Unmarshal([]byte(js), &list)).To(Succeed(), js)
			problems = map[string]inspect.Check{}
			for _, it := range list.Items {
				if !it.Status.OK {
					problems[it.Status.Name] = it.Status
				}
			}
			GinkgoWriter.Printf("$ kubectl nicpool status (exit %d)\n%s", code, text)
			return text, problems, code
		}
		// Pools other specs filled are problems status rightly names; nothing else is.
		noneButPools := func(problems map[string]inspect.Check) []string {
			var out []string
			for name := range problems {
				if !strings.HasPrefix(name, "pool/") {
					out = append(out, name)
				}
			}
			return out
		}

		node := stack.Nodes[0].Name()
		ns := newNamespace(ctx, "status")
		p := newPod(ns, "pinned", map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`})
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		Expect(stack.Client.Create(ctx, p)).To(Succeed())
		runningPod(ctx, ns, "pinned", "")

		By("everything running: every check passes")
		Eventually(func() []string {
			_, problems, code := status(ctx)
			if len(problems) == 0 {
				Expect(code).To(Equal(0))
			}
			return noneButPools(problems)
		}).WithContext(ctx).Should(BeEmpty())

		By("stopping nicpool-webhook: status names it and the fix")
		Expect(stack.StopWebhook(10 * time.Second)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			if stack.Webhook == nil {
				Expect(stack.StartWebhook(ctx)).To(Succeed())
			}
		})
		text, problems, code := status(ctx)
		Expect(code).To(Equal(1))
		Expect(problems).To(HaveKeyWithValue("webhook-reachable", And(
			HaveField("Message", ContainSubstring("the API server cannot call nicpool-webhook")),
			HaveField("Fix", ContainSubstring("start nicpool-webhook")))))
		Expect(text).To(MatchRegexp(`(?m)^webhook-reachable\s+PROBLEM\s+the API server cannot call nicpool-webhook`))
		Expect(text).To(ContainSubstring("\n    fix: start nicpool-webhook"))
		Expect(stack.StartWebhook(ctx)).To(Succeed())
		Eventually(func() map[string]inspect.Check {
			_, problems, _ := status(ctx)
			return problems
		}).WithContext(ctx).ShouldNot(HaveKey("webhook-reachable"))

		By("stopping ipamd on " + node + ": status names the node")
		Expect(stack.StopIpamd(node, 10*time.Second)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = stack.StartIpamd(ctx, node) })
		Eventually(func() map[string]inspect.Check {
			_, problems, _ := status(ctx)
			return problems
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(HaveKeyWithValue("ipamd/"+node, And(
			HaveField("Node", node),
			HaveField("Message", ContainSubstring("ipamd on node "+node+" stopped")),
			HaveField("Fix", ContainSubstring("--field-selector spec.nodeName="+node)))))
		_, _, code = status(ctx)
		Expect(code).To(Equal(1))

		By("status --wait, started while ipamd is down, returns 0 once it is back")
		// Pools other specs filled stay problems: --pool-full-percent above 100 leaves
		// them out.
		waited := make(chan string, 1)
		go func() {
			defer GinkgoRecover()
			cmd := exec.CommandContext(ctx, plugin, "--kubeconfig", stack.AdminKubeconfig, "status", "--wait", "--wait-duration=3m", "--pool-full-percent=101")
			out, err := cmd.CombinedOutput()
			GinkgoWriter.Printf("$ kubectl nicpool status --wait (%v)\n%s", err, out)
			if err != nil {
				waited <- err.Error()
				return
			}
			waited <- "exit 0"
		}()
		Expect(stack.StartIpamd(ctx, node)).To(Succeed())
		Eventually(waited).WithContext(ctx).WithTimeout(3*time.Minute + 30*time.Second).Should(Receive(Equal("exit 0")))
		Eventually(func() []string {
			_, problems, _ := status(ctx)
			return noneButPools(problems)
		}).WithContext(ctx).Should(BeEmpty())
		checkInvariants(ctx)
	})
})
