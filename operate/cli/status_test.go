package cli_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// status names each problem with its fix, per node where it applies; the webhook's
// absence and its reachability are shown on the local stack (e2e/suite).
func TestStatusNamesEachProblemAndItsFix(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "status")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("status-full", "10.42.0.0/16", []string{"10.42.0.10-10.42.0.11"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("status-off", "10.43.0.0/16", []string{"10.43.0.10"}))
	runPod(t, ns, "a", nic{name: "eth0", v4: "status-full"})
	runPod(t, ns, "b", nic{name: "eth0", v4: "status-full"})
	runPod(t, ns, "c", nic{name: "eth0", v4: "status-off"})
	// Full on purpose: a disabled pool is no problem.
	off := &v2beta1.SpiderIPPool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "status-off"}, off)).To(Succeed())
	off.Spec.Disable = ptr.To(true)
	g.Expect(env.Client.Update(ctx, off)).To(Succeed())
	// A pod on a node no ipamd serves.
	g.Expect(env.Client.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranded"},
		Spec:       corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	})).To(Succeed())

	var checks []inspect.Check
	code := kubectlJSON(t, &checks, "status")
	g.Expect(code).To(Equal(cli.ExitFinding))
	byName := map[string]inspect.Check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	g.Expect(byName).To(HaveKeyWithValue("webhook-configurations", And(
		HaveField("OK", false),
		HaveField("Message", "MutatingWebhookConfiguration nicpool-mutating does not exist: nicpool's admission is not installed"),
		HaveField("Fix", ContainSubstring("install nicpool")))))
	g.Expect(byName).To(HaveKeyWithValue("ipamd/"+node, And(HaveField("OK", true), HaveField("Node", node),
		HaveField("Message", ContainSubstring("ipamd serves node "+node+" with its caches synced")))))
	g.Expect(byName).To(HaveKeyWithValue("ipamd/node-b", And(HaveField("OK", false), HaveField("Node", "node-b"),
		HaveField("Message", "no ipamd has served node node-b (no heartbeat Lease nicpool-system/nicpool-ipamd-node-b); it runs 1 pod"),
		HaveField("Fix", ContainSubstring("--field-selector spec.nodeName=node-b")))))
	g.Expect(byName).To(HaveKeyWithValue("pool/status-full", And(HaveField("OK", false),
		HaveField("Message", "pool status-full is near exhaustion: 2 of 2 addresses in use, 0 free"),
		HaveField("Fix", ContainSubstring("add addresses to spec.ips of pool status-full")))))
	g.Expect(byName).NotTo(HaveKey("pool/status-off"))
	g.Expect(byName).To(HaveKeyWithValue("cni", HaveField("OK", true)), "no DaemonSet here: not checked, and said so")

	out, _, code := kubectl(t, "status")
	t.Logf("kubectl nicpool status\n%s", out)
	g.Expect(code).To(Equal(cli.ExitFinding))
	g.Expect(out).To(MatchRegexp(`(?m)^ipamd/node-b\s+PROBLEM\s+no ipamd has served node node-b`))
	g.Expect(out).To(ContainSubstring("\nipamd/node-b: no ipamd has served node node-b (no heartbeat Lease nicpool-system/nicpool-ipamd-node-b); it runs 1 pod\n    fix: kubectl -n nicpool-system get pods -l app.kubernetes.io/name=nicpool-ipamd --field-selector spec.nodeName=node-b"))

	// The configurations without their CA.
	m, v := configs.Configurations(configs.Options{})
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, m) })
	g.Expect(env.Client.Create(ctx, v)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, v) })
	checks = nil
	kubectlJSON(t, &checks, "status")
	byName = map[string]inspect.Check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	g.Expect(byName).NotTo(HaveKey("webhook-configurations"))
	g.Expect(byName).To(HaveKeyWithValue("webhook-cabundle", And(HaveField("OK", false),
		HaveField("Message", HavePrefix("the CA is not injected: mutating webhook pods.nicpool.io: no PEM certificate")))))
	g.Expect(byName).To(HaveKeyWithValue("webhook-reachable", And(HaveField("OK", false),
		HaveField("Message", ContainSubstring("the API server cannot call nicpool-webhook")),
		HaveField("Fix", ContainSubstring("start nicpool-webhook")))))

	// Every problem gone but the webhook's: the node-b pod and the full pool.
	g.Expect(env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranded"}}, client.GracePeriodSeconds(0))).To(Succeed())
	out, _, _ = kubectl(t, "status")
	g.Expect(out).NotTo(ContainSubstring("node-b"))
	g.Expect(strings.Count(out, "PROBLEM")).To(BeNumerically(">=", 2))
}
