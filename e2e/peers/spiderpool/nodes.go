package spiderpool

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The specs of ippoolcr's Context "Test multusName affinity" (its label multusName)
// run a DaemonSet from pools the spec sizes by E2E_KIND_CLUSTER_NODE_LIST, one
// address per node listed, but for one: with SpiderSubnet off, the IPv4 pool always
// has one address (spiderpool's test/e2e/common GenerateExampleIpv4poolObject(1)).
// spiderpool's own CI runs them with SpiderSubnet on (its test/Makefile's
// E2E_SPIDERPOOL_ENABLE_SUBNET ?= true), where that pool is also sized by the node
// list, on a kind cluster of two schedulable nodes (its setup_kind lifts the control
// plane's taint). nicpool has no SpiderSubnet, so the harness runs these specs apart,
// on a cluster of one schedulable node, as the one-address pool needs: every node but
// one carries oneNodeTaint (which a DaemonSet's pods do not tolerate), and the node
// list names that one node. The other suites run first, on every node, and none runs
// meanwhile.
const (
	oneNodeSuite = "ippoolcr"
	oneNodeLabel = "multusName"
)

// oneNodeTaint keeps new pods off the nodes the one-node specs must not use. Pods
// already there stay (NoSchedule).
var oneNodeTaint = corev1.Taint{Key: "e2e.nicpool.io/spiderpool-one-node", Effect: corev1.TaintEffectNoSchedule}

func isOneNodeTaint(t corev1.Taint) bool { return oneNodeTaint.MatchTaint(&t) }

// oneNodeRun says whether the one-node specs run in this selection of suites.
func oneNodeRun(suites []string) bool { return slices.Contains(suites, oneNodeSuite) }

// labelsAnd is Ginkgo's label filter for specs that match both filters; an empty
// filter matches every spec.
func labelsAnd(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return "(" + a + ") && (" + b + ")"
}

// taintNodes puts oneNodeTaint on every node but keep.
func taintNodes(ctx context.Context, c client.Client, nodes []string, keep string) error {
	for _, name := range nodes {
		if name == keep {
			continue
		}
		if err := editTaints(ctx, c, name, func(t []corev1.Taint) []corev1.Taint {
			if slices.ContainsFunc(t, isOneNodeTaint) {
				return t
			}
			return append(t, oneNodeTaint)
		}); err != nil {
			return fmt.Errorf("taint node %s with %s: %w", name, oneNodeTaint.ToString(), err)
		}
	}
	return nil
}

// untaintNodes removes oneNodeTaint from every node that has it (this run's, or a
// run that stopped before it could).
func untaintNodes(ctx context.Context, c client.Client) error {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if !slices.ContainsFunc(n.Spec.Taints, isOneNodeTaint) {
			continue
		}
		if err := editTaints(ctx, c, n.Name, func(t []corev1.Taint) []corev1.Taint {
			return slices.DeleteFunc(t, isOneNodeTaint)
		}); err != nil {
			return fmt.Errorf("remove %s from node %s: %w", oneNodeTaint.ToString(), n.Name, err)
		}
	}
	return nil
}

// editTaints rewrites a node's taints with edit, again if the node changed meanwhile.
func editTaints(ctx context.Context, c client.Client, name string, edit func([]corev1.Taint) []corev1.Taint) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		before := len(n.Spec.Taints)
		n.Spec.Taints = edit(slices.Clone(n.Spec.Taints))
		if len(n.Spec.Taints) == before {
			return nil
		}
		return c.Update(ctx, n)
	})
}
