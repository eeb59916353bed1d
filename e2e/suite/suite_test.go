package suite

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nicpool/nicpool/e2e/fabric"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// stack is the cluster every spec runs against.
var stack *local.Stack

func TestEndToEnd(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	// Specs pass their context to Eventually; without this it would wait for the
	// context alone, i.e. forever.
	EnforceDefaultTimeoutsWhenUsingContexts()
	RunSpecs(t, "nicpool end to end")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	stack, err = local.Up(ctx, local.Options{Nodes: 3, Out: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(stack.Down()).To(Succeed())
		Expect(fabric.Leftovers()).To(BeEmpty(), "network namespaces left behind")
	})
	examples := testenv.RepoRoot() + "/examples/"
	_, err = stack.Apply(ctx, examples+local.ExamplePools, examples+local.ExampleNetworks)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("cluster state in %s, IPAM %s\n", stack.Dir, stack.IPAM)
}, NodeTimeout(10*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && stack != nil {
		// What a user would look at first: where each pod is and what it got.
		rows, err := stack.PodInterfaces(context.Background(), "")
		if err == nil {
			_ = local.PrintPodInterfaces(GinkgoWriter, rows)
		}
		GinkgoWriter.Printf("logs under %s\n", stack.Dir)
	}
})
