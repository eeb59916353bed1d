package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Partition cuts the node off the control plane, as a network partition would: the
// stand-in stops acting on its pods (no CNI ADD or DEL, no pod status, no deletion
// finished), while their sandboxes keep running. The Node's Ready condition turns
// Unknown, as the node lifecycle controller (absent from the local cluster) reports a
// node that stopped posting its status. Heal undoes both.
func (n *Node) Partition(ctx context.Context) error {
	n.mu.Lock()
	n.partitioned = true
	n.mu.Unlock()
	return n.setReady(ctx, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.")
}

// Heal reconnects a partitioned node: it reports Ready again and catches up with
// whatever happened to its pods meanwhile.
func (n *Node) Heal(ctx context.Context) error {
	if err := n.setReady(ctx, corev1.ConditionTrue, "KubeletReady", "node stand-in is ready"); err != nil {
		return err
	}
	n.mu.Lock()
	n.partitioned = false
	missed := n.missed
	n.missed = nil
	n.mu.Unlock()
	for key := range missed {
		n.queue.Add(key)
	}
	return nil
}

// cutOff reports whether the node is partitioned, and remembers key for Heal.
func (n *Node) cutOff(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.partitioned {
		return false
	}
	if n.missed == nil {
		n.missed = map[string]bool{}
	}
	n.missed[key] = true
	return true
}

func (n *Node) setReady(ctx context.Context, status corev1.ConditionStatus, reason, message string) error {
	nodes := n.cfg.Clientset.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		for i := range node.Status.Conditions {
			c := &node.Status.Conditions[i]
			if c.Type == corev1.NodeReady && c.Status != status {
				c.Status, c.Reason, c.Message, c.LastTransitionTime, c.LastHeartbeatTime = status, reason, message, now, now
			}
		}
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set node %s Ready=%s: %w", n.cfg.Name, status, err)
	}
	return nil
}
