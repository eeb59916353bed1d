package suite

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// spiderpool's own cleanup, and many users' scripts, delete a namespace and then, at
// once, the pools its pods used (spiderpool accepts the DELETE and its finalizer keeps
// the pool until its addresses are released). Here the pods' node has stopped
// reporting, so that they are still terminating, holding their addresses, when the
// pools' DELETE comes (on a node that reports, the race is the same with a shorter
// window); the namespace goes through the real kube-controller-manager's namespace
// controller, and nicpool's garbage collector and pool finalizer run as deployed.
var _ = Describe("a namespace and then its pools deleted by a script", func() {
	It("is accepted; the pools go once the pods' addresses are released, and no address is released before its pod is gone", func(ctx SpecContext) {
		ensureKubectl(ctx)
		ns := newNamespace(ctx, "script")
		v4 := fixtures.Pool(ns+"-v4", "10.32.0.0/24", []string{"10.32.0.10-10.32.0.20"})
		v6 := fixtures.Pool(ns+"-v6", "fd00:32::/64", []string{"fd00:32::10-fd00:32::20"})
		for _, p := range []*v2beta1.SpiderIPPool{v4, v6} {
			Expect(stack.Client.Create(ctx, p)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Expect(client.IgnoreNotFound(stack.Client.Delete(ctx, p))).To(Succeed())
			})
		}
		nodes := specNodes()
		node := nodes[len(nodes)-1]
		var held []string
		for _, name := range []string{"a", "b"} {
			p := newPod(ns, name, map[string]string{annotations.IPPool: `{"ipv4":["` + v4.Name + `"],"ipv6":["` + v6.Name + `"]}`})
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node.Name()}
			Expect(stack.Client.Create(ctx, p)).To(Succeed())
			runningPod(ctx, ns, name, "")
			got := allocationsOf(ctx, ns+"/"+name)
			Expect(got).To(HaveLen(2), "pod %s holds an address of each pool", name)
			held = append(held, got...)
		}

		By("cutting " + node.Name() + " off, so that its pods stay terminating with their addresses")
		Expect(node.Partition(ctx)).To(Succeed())
		healed := false
		DeferCleanup(func(ctx SpecContext) {
			if !healed {
				Expect(node.Heal(ctx)).To(Succeed())
			}
		})

		By("the script: kubectl delete namespace, then kubectl delete of its pools at once")
		out := kubectlScript(ctx,
			"kubectl delete namespace "+ns+" --wait=false",
			"kubectl delete spiderippool "+v4.Name+" "+v6.Name+" --wait=false")
		Expect(out).To(ContainSubstring(`namespace "` + ns + `" deleted`))
		for _, p := range []*v2beta1.SpiderIPPool{v4, v6} {
			Expect(out).To(ContainSubstring(`spiderippool.spiderpool.spidernet.io "` + p.Name + `" deleted`))
			Expect(out).To(ContainSubstring("Warning: pool " + p.Name + " still has 2 allocated address(es)"))
		}

		By("the pools terminating, every address still held while its pod is")
		for _, p := range []*v2beta1.SpiderIPPool{v4, v6} {
			got := &v2beta1.SpiderIPPool{}
			Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			Expect(got.DeletionTimestamp).NotTo(BeNil(), "pool %s", p.Name)
		}
		// The namespace controller deletes the pods; on a node that does not report they
		// stay terminating, and keep their addresses through the garbage collector's passes.
		Eventually(func(g Gomega) {
			for _, name := range []string{"a", "b"} {
				pod := &corev1.Pod{}
				g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
				g.Expect(pod.DeletionTimestamp).NotTo(BeNil(), "pod %s deleted by the namespace controller", name)
			}
		}).WithContext(ctx).Should(Succeed())
		Consistently(func(g Gomega) {
			var now []string
			for _, name := range []string{"a", "b"} {
				pod := &corev1.Pod{}
				g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed(), "pod %s, on a node that does not report, stays", name)
				now = append(now, allocationsOf(ctx, ns+"/"+name)...)
			}
			g.Expect(now).To(ConsistOf(held))
			for _, p := range []*v2beta1.SpiderIPPool{v4, v6} {
				g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(p), &v2beta1.SpiderIPPool{})).To(Succeed(), "pool %s stays while it holds addresses", p.Name)
			}
		}).WithContext(ctx).WithTimeout(gcWindow).Should(Succeed())

		By("the node back: its pods' CNI DELs release the addresses, the pods and then the pools go")
		Expect(node.Heal(ctx)).To(Succeed())
		healed = true
		Eventually(func(g Gomega) {
			for _, p := range []*v2beta1.SpiderIPPool{v4, v6} {
				err := stack.Client.Get(ctx, client.ObjectKeyFromObject(p), &v2beta1.SpiderIPPool{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pool %s: %v", p.Name, err)
			}
			err := stack.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s: %v", ns, err)
		}).WithContext(ctx).Should(Succeed())
		Expect(allocationsOf(ctx, ns+"/a")).To(BeEmpty())
		Expect(allocationsOf(ctx, ns+"/b")).To(BeEmpty())
		checkInvariants(ctx)
	})
})

// gcWindow spans more than one pass of the local stack's garbage collector
// (--gc-interval=10s): long enough for a pass to release what it would.
const gcWindow = 15 * time.Second

// kubectlScript runs command lines one after the other as a shell script does, with
// bin/kubectl and the cluster's admin kubeconfig, each expected to succeed, and returns
// what they printed (stdout and stderr, where kubectl writes the API server's warnings).
func kubectlScript(ctx context.Context, lines ...string) string {
	GinkgoHelper()
	root := testenv.RepoRoot()
	env := append(os.Environ(), "KUBECONFIG="+stack.AdminKubeconfig, "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"))
	var all bytes.Buffer
	for _, line := range lines {
		f := strings.Fields(line)
		if f[0] == "kubectl" {
			f[0] = filepath.Join(root, "bin", "kubectl")
		}
		cmd := exec.CommandContext(ctx, f[0], f[1:]...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		GinkgoWriter.Printf("$ %s\n%s", line, out)
		Expect(err).NotTo(HaveOccurred(), "%s\n%s", line, out)
		all.Write(out)
	}
	return all.String()
}
