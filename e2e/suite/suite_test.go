package suite

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// stack is the cluster every spec runs against.
var stack *local.Stack

// nodeKind is what plays the nodes (NICPOOL_E2E_NODE: standin, the default, or
// kubelet). Specs that rely on a stand-in's shortcut are registered for stand-ins
// only, next to their real-node version.
var nodeKind = local.NodeKind(os.Getenv("NICPOOL_E2E_NODE"))

func TestEndToEnd(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	// Specs pass their context to Eventually; without this it would wait for the
	// context alone, i.e. forever.
	EnforceDefaultTimeoutsWhenUsingContexts()
	// controller-runtime's clients log to the spec's output (shown when it fails), and
	// print no "log.SetLogger(...) was never called" stack.
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "nicpool end to end")
}

// failed is set when a spec fails, so the logs of the run are kept for reading.
var failed bool

var _ = BeforeSuite(func(ctx SpecContext) {
	dir, err := os.MkdirTemp("", "nicpool-e2e-")
	Expect(err).NotTo(HaveOccurred())
	stack, err = local.Up(ctx, local.Options{Dir: dir, Nodes: 3, Node: nodeKind, Out: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		// The check below sees a running stack: its processes, and on real nodes the
		// nodes' daemons and containers.
		running := stack.Leftovers()
		Expect(running).To(ContainElement(ContainSubstring("started by this stack")))
		if stack.NodeKind == local.NodeKubelet {
			Expect(running).To(ContainElement(ContainSubstring("in a namespace of the stack")))
			Expect(running).To(ContainElement(ContainSubstring("in a cgroup of a node")))
		}
		Expect(stack.Down()).To(Succeed())
		// What `make down` checks too: no process, namespace, cgroup or mount left.
		Eventually(stack.Leftovers).WithTimeout(time.Minute).Should(BeEmpty(), "left behind by the stack")
		if failed {
			GinkgoWriter.Printf("kept the logs of the failed run in %s\n", dir)
			return
		}
		Expect(os.RemoveAll(dir)).To(Succeed())
	})
	examples := testenv.RepoRoot() + "/examples/"
	_, err = stack.Apply(ctx, examples+local.ExamplePools, examples+local.ExampleNetworks)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("cluster state in %s, nodes %s\n", stack.Dir, stack.NodeKind)
}, NodeTimeout(10*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		failed = true
	}
	if r.Failed() && stack != nil {
		// What a user would look at first: where each pod is and what it got.
		rows, err := stack.PodInterfaces(context.Background(), "")
		if err == nil {
			_ = local.PrintPodInterfaces(GinkgoWriter, rows)
		}
		GinkgoWriter.Printf("logs under %s\n", stack.Dir)
	}
})
