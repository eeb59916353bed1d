package migrate

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/ipamconf"
)

// TestResolvePods: the pods the webhook would see get its decision; those it never
// sees, or that never have another ADD, are left alone; one it would refuse is named.
func TestResolvePods(t *testing.T) {
	positional := map[string]string{annotations.IPPools: `[{"ipv4":["v4"]}]`}
	withAnnotations := func(p corev1.Pod, a map[string]string) corev1.Pod {
		p.Annotations = a
		return p
	}
	system := withAnnotations(pod("agent", "u-sys", corev1.PodRunning, ""), positional)
	system.Namespace = "kube-system"
	deleting := withAnnotations(pod("deleting", "u-del", corev1.PodRunning, ""), positional)
	deleting.DeletionTimestamp = &metav1.Time{}
	in := Inputs{
		Pools: []Pool{v4Pool(nil)},
		Pods: []corev1.Pod{
			withAnnotations(pod("a", "u-a", corev1.PodRunning, ""), positional),
			withAnnotations(pod("single", "u-s", corev1.PodPending, ""), map[string]string{annotations.IPPool: `{"ipv4":["v4"]}`}),
			withAnnotations(pod("done", "u-d", corev1.PodSucceeded, ""), positional),
			system, deleting,
			pod("plain", "u-p", corev1.PodRunning, ""),
			withAnnotations(pod("bad", "u-b", corev1.PodRunning, ""), map[string]string{annotations.IPPools: `[{"ipv4":["nope"]}]`}),
		},
		Namespaces: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}},
	}
	changes, warnings := newAdmitter(in, ipamconf.Switches{}).resolvePods(context.Background(), in.Pods)
	want := []PodChange{
		{Pod: "ns/a", UID: "u-a", Set: map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["v4"]}]`}},
		{Pod: "ns/single", UID: "u-s", Set: map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["v4"]}]`}},
	}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("changes (-want +got)\n%s", diff)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0].Message, "pod ns/bad: nicpool's admission would refuse it (") ||
		!strings.Contains(warnings[0].Message, `"nope"`) || warnings[0].Fix != "correct its owner's pod template, then, once nicpool runs: kubectl delete pod -n ns bad" {
		t.Errorf("warnings: %+v", warnings)
	}
}
