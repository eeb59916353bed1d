package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/operate/migrate"
)

// A network chains spiderpool's coordinator on a cluster without the SpiderCoordinator
// CRD: the migration says the CRD is not installed (as ipamd would refuse
// coordinator's every question for it), with a fix that installs it, not "no
// SpiderCoordinator", whose fix (create one) cannot be carried out without the CRD.
// The fix as printed, run against the API server, clears the blocker.
func TestNoSpiderCoordinatorCRD(t *testing.T) {
	ctx := context.Background()
	c := suite.env.Client
	disc := discovery(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nocrd"}}); err != nil {
		t.Fatal(err)
	}
	nad := &unstructured.Unstructured{}
	nad.SetGroupVersionKind(schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"})
	nad.SetNamespace("nocrd")
	nad.SetName("chained")
	nad.Object["spec"] = map[string]any{"config": `{"cniVersion":"0.3.1","name":"chained","plugins":[{"type":"macvlan","master":"` + parent + `","ipam":{"type":"spiderpool"}},{"type":"coordinator"}]}`}
	if err := c.Create(ctx, nad); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), nad) })

	// The SpiderCoordinators there are (another test's), to put back once the CRD is.
	var before v2beta1.SpiderCoordinatorList
	if err := c.List(ctx, &before); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: coordinator.CRD}}
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// What the fix below does, done again should the test stop before it: the CRD and
	// the SpiderCoordinators back, for the tests that follow.
	restored := false
	restore := func(cmd string) {
		run := exec.Command("bash", "-c", cmd)
		run.Dir = testenv.RepoRoot()
		run.Env = append(os.Environ(), "KUBECONFIG="+suite.env.Kubeconfig, "PATH="+filepath.Join(testenv.RepoRoot(), "bin")+":"+os.Getenv("PATH"))
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		fixtures.Eventually(t, "the API server to serve SpiderCoordinators again", func() bool {
			served, err := suite.env.Serves(v2beta1.GroupVersion, "spidercoordinators")
			return err == nil && served && c.List(ctx, &v2beta1.SpiderCoordinatorList{}) == nil
		})
		if len(before.Items) == 0 {
			before.Items = []v2beta1.SpiderCoordinator{{ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: v2beta1.CoordinatorSpec{PodCIDRType: ptr.To(v2beta1.PodCIDRTypeNone)}}}
		}
		for _, sc := range before.Items {
			again := &v2beta1.SpiderCoordinator{ObjectMeta: metav1.ObjectMeta{Name: sc.Name, Labels: sc.Labels, Annotations: sc.Annotations}, Spec: sc.Spec}
			if err := c.Create(ctx, again); err != nil {
				t.Fatalf("create SpiderCoordinator %s: %v", sc.Name, err)
			}
		}
		restored = true
	}
	t.Cleanup(func() {
		if !restored {
			restore("kubectl apply --server-side -f manifests/base/crds/spiderpool.spidernet.io_spidercoordinators.yaml")
		}
	})
	fixtures.Eventually(t, "the API server to stop serving SpiderCoordinators", func() bool {
		served, err := suite.env.Serves(v2beta1.GroupVersion, "spidercoordinators")
		return err == nil && !served
	})

	// Another test's network may chain coordinator too: the problem names them all.
	names := func(p migrate.Problem) bool {
		head, _, _ := strings.Cut(p.Message, " spiderpool's coordinator plugin")
		return strings.Contains(head, "nocrd/chained")
	}
	plan, err := migrate.Run(ctx, c, disc, migrate.Options{})
	if err != nil {
		t.Fatalf("the migration's plan without the SpiderCoordinator CRD: %v", err)
	}
	var fix string
	for _, p := range plan.Blockers {
		if !names(p) {
			continue
		}
		if !strings.Contains(p.Message, "the API server serves no SpiderCoordinator: its CRD spidercoordinators.spiderpool.spidernet.io is not installed") {
			t.Errorf("blocker %q does not say the CRD is not installed", p.Message)
		}
		if fix != "" {
			t.Errorf("more than one blocker of the network: %+v", plan.Blockers)
		}
		fix = p.Fix
	}
	if fix == "" {
		t.Fatalf("no blocker names nocrd/chained: %+v", plan.Blockers)
	}

	// The fix, as printed: nicpool's CRD applied from nicpool's source, then the
	// SpiderCoordinator default with podCIDRType none.
	const apply = "kubectl apply --server-side -f "
	i := strings.Index(fix, apply)
	if i < 0 {
		t.Fatalf("fix %q names no kubectl apply of the CRD", fix)
	}
	cmd := apply + strings.Fields(fix[i+len(apply):])[0]
	restore(cmd)

	plan, err = migrate.Run(ctx, c, disc, migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan.Blockers {
		if names(p) && (strings.Contains(p.Message, "serves no SpiderCoordinator") || strings.Contains(p.Message, "no SpiderCoordinator to answer from")) {
			t.Errorf("the CRD installed as the fix says, still: %s", p.Message)
		}
	}
}
