package suite

import (
	"errors"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

var _ = Describe("a namespace's own users", func() {
	It("read their pods' addresses with kubectl nicpool pod through the view role, and nothing of another namespace", func(ctx SpecContext) {
		plugin := filepath.Join(kubectlNicpool(ctx), "kubectl-nicpool")
		run := func(args ...string) (stdout, stderr string, code int) {
			cmd := exec.CommandContext(ctx, plugin, append([]string{"--kubeconfig", stack.AdminKubeconfig}, args...)...)
			var out, errOut strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else {
				Expect(err).NotTo(HaveOccurred())
			}
			GinkgoWriter.Printf("$ kubectl nicpool %s (exit %d)\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
			return out.String(), errOut.String(), code
		}
		ns, other := newNamespace(ctx, "viewer"), newNamespace(ctx, "viewer-other")
		for _, p := range []struct{ ns, name string }{{ns, "web"}, {other, "db"}} {
			Expect(stack.Client.Create(ctx, newPod(p.ns, p.name, map[string]string{annotations.IPPool: `{"ipv4":["eth0-v4"]}`}))).To(Succeed())
			runningPod(ctx, p.ns, p.name, "")
		}
		ep := &v2beta1.SpiderEndpoint{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ep)).To(Succeed())
		Expect(ep.Status.Current.IPs).NotTo(BeEmpty())
		addr := netip.MustParsePrefix(*ep.Status.Current.IPs[0].IPv4).Addr().String()

		By("alice holds Kubernetes's view role in her namespace only")
		Expect(stack.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-view"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
		})).To(Succeed())
		// kube-controller-manager folds nicpool-view into view (its aggregation label).
		var out, errOut string
		Eventually(func() int {
			var code int
			out, errOut, code = run("pod", ns+"/web", "--as", "alice")
			return code
		}).WithContext(ctx).Should(Equal(0))
		Expect(out).To(ContainSubstring(addr))
		Expect(out).To(ContainSubstring("unchecked"))
		Expect(errOut).To(ContainSubstring("agreement with the records is not checked"))
		By("another namespace's pod is refused to her")
		_, errOut, code := run("pod", other+"/db", "--as", "alice")
		Expect(code).To(Equal(2))
		Expect(errOut).To(ContainSubstring("forbidden"))

		By("a cluster admin sees the same pod with its records checked")
		out, _, code = run("pod", ns+"/web")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring(addr))
		Expect(out).NotTo(ContainSubstring("unchecked"))
		Expect(out).To(MatchRegexp(`(?m)^eth0 .* yes$`))
	})
})
