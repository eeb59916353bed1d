package migrate

import (
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCoordinatorChainsAreNamedBeforeTheMigration(t *testing.T) {
	nad := func(ns, name, config string) nadv1.NetworkAttachmentDefinition {
		return nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
		}
	}
	nads := []nadv1.NetworkAttachmentDefinition{
		nad("kube-system", "macvlan-coord", `{"cniVersion":"0.3.1","name":"m","plugins":[{"type":"macvlan","master":"eth0","ipam":{"type":"spiderpool"}},{"type":"coordinator"}]}`),
		nad("kube-system", "macvlan-plain", `{"cniVersion":"0.3.1","name":"m","plugins":[{"type":"macvlan","master":"eth0","ipam":{"type":"spiderpool"}}]}`),
		nad("tenant", "single-coord", `{"cniVersion":"0.3.1","name":"c","type":"coordinator"}`),
		nad("tenant", "ipam-named-coordinator", `{"cniVersion":"0.3.1","name":"c","type":"macvlan","ipam":{"type":"coordinator"}}`),
		nad("tenant", "garbage", `{"plugins":[{"type":"coordinator"}`),
	}
	got := coordinatorChains(nads)
	var names []string
	for _, p := range got {
		if !strings.Contains(p.Message, "/v1/coordinator/config") || !strings.Contains(p.Fix, `remove the "coordinator" entry`) {
			t.Errorf("problem does not name the endpoint and the fix: %+v", p)
		}
		names = append(names, strings.Fields(p.Message)[1])
	}
	want := []string{"kube-system/macvlan-coord", "tenant/single-coord"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("networks named: %v, want %v", names, want)
	}
}
