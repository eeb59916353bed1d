package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/coordinator"
)

// TestCoordinatorChainsAreNamedBeforeTheMigration: networks that chain coordinator
// block the migration only while ipamd could not answer coordinator for them (no
// SpiderCoordinator, one ipamd refuses, no ServiceCIDR API), each problem naming the
// networks, the SpiderCoordinator's field and the fix; a SpiderCoordinator ipamd
// serves, or no network chaining coordinator, blocks nothing.
func TestCoordinatorChainsAreNamedBeforeTheMigration(t *testing.T) {
	nad := func(ns, name, config string) nadv1.NetworkAttachmentDefinition {
		return nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
		}
	}
	plain := nad("kube-system", "macvlan-plain", `{"cniVersion":"0.3.1","name":"m","plugins":[{"type":"macvlan","master":"eth0","ipam":{"type":"spiderpool"}}]}`)
	nads := []nadv1.NetworkAttachmentDefinition{
		nad("kube-system", "macvlan-coord", `{"cniVersion":"0.3.1","name":"m","plugins":[{"type":"macvlan","master":"eth0","ipam":{"type":"spiderpool"}},{"type":"coordinator"}]}`),
		plain,
		nad("tenant", "single-coord", `{"cniVersion":"0.3.1","name":"c","type":"coordinator"}`),
		nad("tenant", "ipam-named-coordinator", `{"cniVersion":"0.3.1","name":"c","type":"macvlan","ipam":{"type":"coordinator"}}`),
		nad("tenant", "garbage", `{"plugins":[{"type":"coordinator"}`),
	}
	const named = "network-attachment-definitions kube-system/macvlan-coord, tenant/single-coord chain spiderpool's coordinator plugin"

	// spiderpool's chart's SpiderCoordinator as spiderpool's controller left it.
	chart := v2beta1.SpiderCoordinator{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v2beta1.CoordinatorSpec{Mode: ptr.To("auto"), PodCIDRType: ptr.To("auto"), HijackCIDR: []string{"169.254.0.0/16"}},
		Status:     v2beta1.CoordinatorStatus{Phase: "Synced", OverlayPodCIDR: []string{"10.244.0.0/16"}, ServiceCIDR: []string{"10.96.0.0/12"}},
	}
	all := coordinator.Served{SpiderCoordinators: true, ServiceCIDRs: true}
	noServiceCIDRs := coordinator.Served{SpiderCoordinators: true}
	got := coordinatorProblems(nads, []v2beta1.SpiderCoordinator{chart}, all)
	if len(got) != 1 || !strings.HasPrefix(got[0].Message, named) || !strings.Contains(got[0].Message, "spidercoordinator default: spec.podCIDRType") ||
		got[0].Fix != `kubectl patch spidercoordinator default --type merge -p '{"spec":{"hijackCIDR":["169.254.0.0/16","10.244.0.0/16"],"podCIDRType":"none"}}' (the pod CIDRs spiderpool detected, status.overlayPodCIDR, become hijackCIDR entries, which coordinator routes alike; docs/migrate-from-spiderpool.md)` {
		t.Errorf("the chart's SpiderCoordinator: %+v", got)
	}

	got = coordinatorProblems(nads, nil, all)
	if len(got) != 1 || !strings.HasPrefix(got[0].Message, named) || !strings.Contains(got[0].Message, "no SpiderCoordinator to answer from") || !strings.Contains(got[0].Fix, "podCIDRType none") {
		t.Errorf("no SpiderCoordinator: %+v", got)
	}

	// No SpiderCoordinator CRD: the fix is to install it (the file it names is
	// nicpool's), not only to create the object, which cannot be created without it.
	got = coordinatorProblems(nads, nil, coordinator.Served{ServiceCIDRs: true})
	if len(got) != 1 || !strings.HasPrefix(got[0].Message, named) ||
		!strings.Contains(got[0].Message, "serves no SpiderCoordinator: its CRD spidercoordinators.spiderpool.spidernet.io is not installed") ||
		!strings.Contains(got[0].Fix, "kubectl apply --server-side -f manifests/base/crds/spiderpool.spidernet.io_spidercoordinators.yaml") ||
		!strings.Contains(got[0].Fix, "podCIDRType none") {
		t.Errorf("no SpiderCoordinator CRD: %+v", got)
	}
	if _, err := os.Stat(filepath.Join("..", "..", crdFile)); err != nil {
		t.Errorf("the fix names %s, which is not nicpool's: %v", crdFile, err)
	}

	bad := chart
	bad.Spec.PodCIDRType, bad.Spec.PodMACPrefix = ptr.To("none"), ptr.To("01:00")
	got = coordinatorProblems(nads, []v2beta1.SpiderCoordinator{bad}, noServiceCIDRs)
	if len(got) != 2 || !strings.Contains(got[0].Message, "ServiceCIDR") || !strings.Contains(got[1].Message, "spec.podMACPrefix") ||
		!strings.Contains(got[1].Fix, "kubectl edit spidercoordinator default") {
		t.Errorf("no ServiceCIDR API and a multicast MAC prefix: %+v", got)
	}

	served := chart
	served.Spec.PodCIDRType = ptr.To("none")
	if got := coordinatorProblems(nads, []v2beta1.SpiderCoordinator{served}, all); len(got) != 0 {
		t.Errorf("a SpiderCoordinator ipamd serves blocks: %+v", got)
	}
	if got := coordinatorProblems([]nadv1.NetworkAttachmentDefinition{plain}, nil, coordinator.Served{}); len(got) != 0 {
		t.Errorf("no network chains coordinator, yet: %+v", got)
	}
}
