package inspect

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// States of a record's holder.
const (
	// StateLive: the pod with the record's UID exists and is neither finished nor
	// being deleted.
	StateLive = "live"
	// StateTerminating: the pod is being deleted.
	StateTerminating = "terminating"
	// StateFinished: the pod is Succeeded or Failed.
	StateFinished = "finished"
	// StateGone: no pod with the record's UID exists.
	StateGone = "gone"
)

// Holder is the pod a record names, as it is now.
type Holder struct {
	// State is one of StateLive, StateTerminating, StateFinished, StateGone.
	State string `json:"state"`
	// Detail says more: the phase, when the grace period of a terminating pod ends,
	// which UID now has the pod's name.
	Detail string `json:"detail,omitempty"`
	// Node is the pod's node; for a pod that is gone, the node its endpoint recorded.
	Node string `json:"node,omitempty"`
}

// SplitPod splits a record's "namespace/name".
func SplitPod(pod string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(pod, "/")
	return namespace, name, ok && namespace != "" && name != ""
}

// HolderOf reads the pod a record names and says what became of it. pod is the pod
// with the record's UID, nil when it is gone.
func HolderOf(ctx context.Context, r client.Reader, rec v2beta1.PoolIPAllocation, now time.Time) (Holder, *corev1.Pod, error) {
	ns, name, ok := SplitPod(rec.Pod)
	if !ok {
		return Holder{State: StateGone, Detail: fmt.Sprintf("the record names no pod (%q)", rec.Pod)}, nil, nil
	}
	pod := &corev1.Pod{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return Holder{State: StateGone, Detail: "no pod " + rec.Pod}, nil, nil
	case err != nil:
		return Holder{}, nil, fmt.Errorf("read pod %s: %w", rec.Pod, err)
	case string(pod.UID) != rec.PodUID:
		return Holder{State: StateGone, Detail: fmt.Sprintf("pod %s is now UID %s", rec.Pod, pod.UID), Node: pod.Spec.NodeName}, nil, nil
	}
	return describe(pod, now), pod, nil
}

func describe(pod *corev1.Pod, now time.Time) Holder {
	h := Holder{Node: pod.Spec.NodeName}
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		h.State, h.Detail = StateFinished, string(pod.Status.Phase)
	case pod.DeletionTimestamp != nil:
		h.State = StateTerminating
		// The API server sets deletionTimestamp to the deletion request plus the
		// pod's grace period: the instant its containers must be gone.
		end := pod.DeletionTimestamp.UTC().Format(time.RFC3339)
		if now.Before(pod.DeletionTimestamp.Time) {
			h.Detail = "grace period ends " + end
		} else {
			h.Detail = "past its grace period since " + end
		}
	default:
		h.State, h.Detail = StateLive, string(pod.Status.Phase)
	}
	return h
}

// endpointOf reads the SpiderEndpoint of a record's pod; nil when there is none.
func endpointOf(ctx context.Context, r client.Reader, pod string) (*v2beta1.SpiderEndpoint, error) {
	ns, name, ok := SplitPod(pod)
	if !ok {
		return nil, nil
	}
	ep := &v2beta1.SpiderEndpoint{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read SpiderEndpoint %s: %w", pod, err)
	}
	return ep, nil
}

// Disagreement says how the endpoint of a record's pod differs from the record: it
// should list the record's address, in the record's pool, on the record's interface,
// for the record's pod UID. Empty when it does.
func Disagreement(ep *v2beta1.SpiderEndpoint, rec ledger.Record) string {
	h := rec.Holder
	if ep == nil {
		return "no SpiderEndpoint " + h.Pod
	}
	name := "SpiderEndpoint " + ep.Namespace + "/" + ep.Name
	if ep.Status.Current.UID != h.PodUID {
		return fmt.Sprintf("%s belongs to pod UID %s", name, ep.Status.Current.UID)
	}
	for _, d := range ep.Status.Current.IPs {
		if d.Interface != h.Interface {
			continue
		}
		addr, pool := d.IPv6, d.IPv6Pool
		if rec.Addr.Is4() {
			addr, pool = d.IPv4, d.IPv4Pool
		}
		got, ok := endpointAddr(addr)
		switch {
		case !ok:
			return fmt.Sprintf("%s records no IPv%d address on %s", name, ipranges.Family(rec.Addr), h.Interface)
		case got != rec.Addr:
			return fmt.Sprintf("%s records %s on %s", name, got, h.Interface)
		case pool == nil || *pool != rec.Pool:
			return fmt.Sprintf("%s records %s in pool %s", name, got, deref(pool))
		}
		return ""
	}
	return fmt.Sprintf("%s has no interface %s", name, h.Interface)
}

// endpointAddr parses an endpoint's address, written in CIDR form.
func endpointAddr(s *string) (netip.Addr, bool) {
	if s == nil {
		return netip.Addr{}, false
	}
	if p, err := netip.ParsePrefix(*s); err == nil {
		return p.Addr(), true
	}
	a, err := netip.ParseAddr(*s)
	return a, err == nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
