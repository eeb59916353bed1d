package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/nicpool/nicpool/e2e/fabric"
)

// cniTimeout bounds one CNI ADD or DEL through Multus.
const cniTimeout = 2 * time.Minute

// hostIP is every node's address: the node stand-ins share this host.
const hostIP = "127.0.0.1"

// sync brings one pod's sandbox in line with the pod, as the kubelet's pod worker
// does for networking.
func (n *Node) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		// Retrying a key that does not parse never helps: it is dropped.
		n.cfg.Log.Info("dropping a malformed pod key", "pod", key, "error", err.Error())
		return nil
	}
	if n.cutOff(key) {
		return nil
	}
	pod, err := n.pods.Pods(namespace).Get(name)
	if err != nil && ignoreNotFound(err) != nil {
		return err
	}
	sb := n.sandbox(key)
	if pod == nil {
		// Deleted without us (force delete): the runtime still tears the sandbox down.
		return n.teardown(ctx, key, sb)
	}
	if sb != nil && (sb.uid != string(pod.UID) || !sb.ready) {
		// A new pod with the same name (StatefulSet), or the remains of a failed ADD:
		// the old sandbox goes first.
		if err := n.teardown(ctx, key, sb); err != nil {
			return err
		}
		sb = nil
	}
	if pod.Spec.HostNetwork {
		// The kubelet calls no CNI plugin for pods on the host's network.
		switch {
		case pod.DeletionTimestamp != nil:
			return n.finishDeletion(ctx, pod)
		case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending:
			return n.reportRunning(ctx, pod, []netip.Addr{netip.MustParseAddr(hostIP)})
		}
		return nil
	}
	switch {
	case pod.DeletionTimestamp != nil:
		if err := n.teardown(ctx, key, sb); err != nil {
			return err
		}
		return n.finishDeletion(ctx, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return n.teardown(ctx, key, sb)
	case sb != nil:
		return nil
	}
	ips, err := n.setup(ctx, key, pod)
	if err != nil {
		// Worded as the kubelet reports containerd's error (libcni's already names the
		// plugin and the verb), so that a page shows what users of either see.
		n.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: rpc error: code = Unknown desc = %v", err)
		if serr := n.reportCreating(ctx, pod); serr != nil {
			return fmt.Errorf("%w; and reporting the pod's containers waiting: %w", err, serr)
		}
		return err
	}
	if err := n.reportRunning(ctx, pod, ips); err != nil {
		return err
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		// Run-to-completion pods (Jobs) finish as soon as they run; the kubelet then
		// tears their sandbox down.
		if err := n.reportSucceeded(ctx, pod); err != nil {
			return err
		}
		return n.teardown(ctx, key, n.sandbox(key))
	}
	return nil
}

func (n *Node) runtimeConf(pod *corev1.Pod, sb *sandbox) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: sb.containerID,
		NetNS:       sb.path,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", sb.containerID},
			{"K8S_POD_UID", sb.uid},
		},
	}
}

// setup creates the pod's namespace and runs CNI ADD. A failed ADD is undone (CNI DEL,
// namespace removed) so the next attempt starts clean, as the kubelet does.
func (n *Node) setup(ctx context.Context, key string, pod *corev1.Pod) ([]netip.Addr, error) {
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	sb := &sandbox{uid: string(pod.UID), containerID: hex.EncodeToString(id)}
	var err error
	if sb.namespace, sb.path, err = fabric.NewPodNamespace(string(pod.UID)); err != nil {
		return nil, err
	}
	rt := n.runtimeConf(pod, sb)
	addCtx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	res, err := n.cni.AddNetworkList(addCtx, n.multus, rt)
	if err != nil {
		n.setSandbox(key, sb)
		if derr := n.teardown(ctx, key, sb); derr != nil {
			n.cfg.Log.Info("cleanup after failed ADD", "pod", key, "error", derr.Error())
		}
		return nil, fmt.Errorf("failed to setup network for sandbox %q: %w", sb.containerID, err)
	}
	sb.ready = true
	n.setSandbox(key, sb)
	result, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	for _, ip := range result.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			ips = append(ips, a.Unmap())
		}
	}
	n.cfg.Log.Info("sandbox ready", "pod", key, "uid", pod.UID, "ips", ips)
	return ips, nil
}

// teardown runs CNI DEL for the sandbox and removes its namespace.
func (n *Node) teardown(ctx context.Context, key string, sb *sandbox) error {
	if sb == nil {
		return nil
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(sb.uid)}}
	pod.Namespace, pod.Name, _ = cache.SplitMetaNamespaceKey(key)
	delCtx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	if err := n.cni.DelNetworkList(delCtx, n.multus, n.runtimeConf(pod, sb)); err != nil {
		return fmt.Errorf("CNI DEL: %w", err)
	}
	if err := fabric.DeleteNamespace(sb.namespace); err != nil {
		return err
	}
	n.setSandbox(key, nil)
	n.cfg.Log.Info("sandbox removed", "pod", key, "uid", sb.uid)
	return nil
}

// finishDeletion removes the pod object once its sandbox is gone, as the kubelet
// does when the containers have stopped.
func (n *Node) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := n.cfg.Clientset.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	return ignoreNotFound(ignoreConflict(err))
}

// reportRunning sets the pod Running and Ready with its cluster-network addresses.
func (n *Node) reportRunning(ctx context.Context, pod *corev1.Pod, ips []netip.Addr) error {
	return n.updateStatus(ctx, pod, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.HostIP = hostIP
		p.Status.HostIPs = []corev1.HostIP{{IP: hostIP}}
		p.Status.StartTime = &now
		p.Status.PodIP, p.Status.PodIPs = "", nil
		seen := map[bool]bool{}
		for _, ip := range ips {
			// One address per family, as the API server allows.
			if seen[ip.Is4()] {
				continue
			}
			seen[ip.Is4()] = true
			if p.Status.PodIP == "" {
				p.Status.PodIP = ip.String()
			}
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip.String()})
		}
		for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			setCondition(p, t, now)
		}
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: new(true),
				ContainerID: "nicpool-e2e://" + string(p.UID) + "-" + c.Name,
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
	})
}

// reportCreating shows the containers of a pod whose sandbox is not set up yet
// waiting, as the kubelet does while it retries the sandbox (kubectl shows the pod
// as ContainerCreating).
func (n *Node) reportCreating(ctx context.Context, pod *corev1.Pod) error {
	if len(pod.Status.ContainerStatuses) > 0 {
		return nil
	}
	return n.updateStatus(ctx, pod, func(p *corev1.Pod) {
		if len(p.Status.ContainerStatuses) > 0 || p.Status.Phase != corev1.PodPending {
			return
		}
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Started: new(false),
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			})
		}
	})
}

// reportSucceeded marks a run-to-completion pod finished with exit code 0.
func (n *Node) reportSucceeded(ctx context.Context, pod *corev1.Pod) error {
	return n.updateStatus(ctx, pod, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		for i := range p.Status.Conditions {
			switch p.Status.Conditions[i].Type {
			case corev1.PodReady, corev1.ContainersReady, corev1.PodReadyToStartContainers:
				p.Status.Conditions[i].Status = corev1.ConditionFalse
				p.Status.Conditions[i].Reason = "PodCompleted"
				p.Status.Conditions[i].LastTransitionTime = now
			}
		}
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			cs.Ready, cs.Started = false, new(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: cs.ContainerID}}
		}
	})
}

func (n *Node) updateStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.Pod)) error {
	pods := n.cfg.Clientset.CoreV1().Pods(pod.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return errGone
		}
		mutate(cur)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func setCondition(p *corev1.Pod, t corev1.PodConditionType, now metav1.Time) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			p.Status.Conditions[i].Status = corev1.ConditionTrue
			p.Status.Conditions[i].LastTransitionTime = now
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
}
