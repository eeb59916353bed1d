package local

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Example files of examples/, in the order they are applied.
var (
	ExamplePools       = "pools.yaml"
	ExampleNetworks    = "networks.yaml"
	ExampleStatefulSet = "statefulset.yaml"
)

// ApplyExamples applies the sample pools, networks and StatefulSet of dir.
func (s *Stack) ApplyExamples(ctx context.Context, dir string) ([]string, error) {
	return s.Apply(ctx,
		filepath.Join(dir, ExamplePools),
		filepath.Join(dir, ExampleNetworks),
		filepath.Join(dir, ExampleStatefulSet))
}

// WaitRunning waits until count pods of namespace matching labels run on a node.
func (s *Stack) WaitRunning(ctx context.Context, namespace string, labels map[string]string, count int, timeout time.Duration) error {
	var running int
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := s.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
			return false, nil //nolint:nilerr // polled again until the timeout, which reports the count
		}
		running = 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running >= count, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods %v in %s running: %w", running, count, labels, namespace, err)
	}
	return nil
}

// ExampleSet is examples/statefulset.yaml's StatefulSet, in default: three pods, each
// with an IPv4 and an IPv6 address on every interface of ExampleInterfaces.
const ExampleSet = "web"

// ExampleInterfaces are the interfaces of ExampleSet's pods: eth0 on the cluster
// network, net1 from the NetworkAttachmentDefinition of examples/networks.yaml.
var ExampleInterfaces = []string{"eth0", "net1"}

// RunningPods lists the pods of namespace matching labels that run on a node and are
// not being deleted.
func (s *Stack) RunningPods(ctx context.Context, namespace string, labels map[string]string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}
