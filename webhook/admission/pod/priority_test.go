package pod_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// As in spiderpool, a pool's spec.namespaceName takes priority over its
// spec.namespaceAffinity: admission admits a pod of a listed namespace whose labels
// the affinity would not match, and refuses one of another namespace whose labels it
// would.
func TestNamespaceNameTakesPriorityOverAffinity(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "prio-listed", map[string]string{"team": "red"})
	createNamespace(t, "prio-labelled", map[string]string{"team": "blue"})
	createPools(t, fixtures.Pool("prio-ns", "10.191.0.0/24", []string{"10.191.0.10-10.191.0.20"}, func(p *v2beta1.SpiderIPPool) {
		p.Spec.NamespaceName = []string{"prio-listed"}
		p.Spec.NamespaceAffinity = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
	}))
	ann := selectionAnnotations("", `[{"ipv4":["prio-ns"]}]`, "")
	if _, err := createPod(ctx, newPod("prio-listed", "listed", ann)); err != nil {
		t.Errorf("pod of a namespace spec.namespaceName lists: %v", err)
	}
	_, err := createPod(ctx, newPod("prio-labelled", "labelled", selectionAnnotations("", `[{"ipv4":["prio-ns"]}]`, "")))
	if err == nil || !strings.Contains(err.Error(), "spec.namespaceName") {
		t.Errorf("pod of a namespace spec.namespaceName does not list: %v; want refused naming spec.namespaceName", err)
	}
}
