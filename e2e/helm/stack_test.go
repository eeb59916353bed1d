package helm_test

import (
	"bytes"
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/helmtest"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/manifests"
)

// standInValues are the values every install on the local stack's node stand-ins
// sets: certificates the webhook makes itself (no cert-manager there), and the
// nodes' cluster network, whose IPAM is nicpool, known to the webhook.
func standInValues() map[string]any {
	return map[string]any{
		"certificates": map[string]any{"mode": "self-managed"},
		"webhook":      map[string]any{"extraArgs": []any{"--cluster-network-nicpool"}},
	}
}

// upWithChart brings up the local stack on node stand-ins with nicpool installed by
// `helm install nicpool <ch> -n ns --create-namespace` (the Helm SDK): the webhook and
// each node's ipamd run as the release's Deployment and DaemonSet say, under its
// service accounts, RBAC and admission policies (local.Options.Install), built from
// source. The stack's API server has nicpool's CRDs already, which the release takes
// over, as after a kustomize install.
func upWithChart(t *testing.T, ns string, ch *chart.Chart, source binaries.Checkout) *local.Stack {
	t.Helper()
	st, err := helmtest.Up(context.Background(), t, "nicpool-helm-stack-", local.Options{
		Namespace: ns,
		Source:    source,
		Install: func(ctx context.Context, s *local.Stack) error {
			inst := action.NewInstall(helmtest.Configure(t, &action.Configuration{}, s.AdminKubeconfig, ns))
			inst.ReleaseName, inst.Namespace, inst.CreateNamespace, inst.TakeOwnership = "nicpool", ns, true, true
			_, err := inst.RunWithContext(ctx, ch, standInValues())
			return err
		},
	})
	if err != nil {
		t.Fatalf("local stack with helm install nicpool -n %s: %v", ns, err)
	}
	return st
}

// sampleSet is examples/statefulset.yaml's StatefulSet (local.ExampleSet).
const sampleSet = local.ExampleSet

// runExamples applies examples/ (pools, network, the StatefulSet) and returns the
// StatefulSet's pods once all three run.
func runExamples(t *testing.T, st *local.Stack) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := st.ApplyExamples(ctx, filepath.Join(root, "examples")); err != nil {
		t.Fatalf("apply examples: %v", err)
	}
	return runningPods(t, st, 3)
}

// runningPods waits until count pods of the sample StatefulSet run, and returns them.
func runningPods(t *testing.T, st *local.Stack, count int) []corev1.Pod {
	t.Helper()
	if err := st.WaitRunning(context.Background(), "default", map[string]string{"app": sampleSet}, count, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	pods, err := st.RunningPods(context.Background(), "default", map[string]string{"app": sampleSet})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// `helm install nicpool charts/nicpool -n some-other-namespace --create-namespace`,
// run as the chart's Deployment and DaemonSet say on the local stack's nodes: the
// webhook resolves the sample StatefulSet's pools and each node's ipamd allocates
// under the release namespace's service accounts, RBAC and admission policies, so
// the pods get their addresses on both networks.
func TestChartInAnotherNamespaceGivesPodsTheirAddresses(t *testing.T) {
	ctx := context.Background()
	const ns = "some-other-namespace"
	st := upWithChart(t, ns, loadChart(t), binaries.Checkout{})
	for _, p := range runExamples(t, st) {
		helmtest.PodAddresses(ctx, t, st, p)
	}
	// ipamd wrote its heartbeat where the release lives (it reads the namespace the
	// chart's DaemonSet gives it).
	lease := &coordinationv1.Lease{}
	if err := st.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nicpool-ipamd-node-1"}, lease); err != nil {
		t.Errorf("ipamd's heartbeat Lease in %s: %v", ns, err)
	}
	helmtest.CheckInvariants(t, st)
}

// previousRelease is where an upgrade starts from: the chart and binaries of the
// last main that CI passed before this version's chart work (2026-12-02). No release
// is tagged yet; once one is, its tag goes here.
const previousRelease = "72979c5c392ba6194dbd6a64e1fe50834722d168"

// checkoutAt extracts commit of this repository into a temporary directory, as a
// checkout the stack builds from. A shallow clone lacks the commit: its history is
// fetched first from where it was cloned.
func checkoutAt(t *testing.T, commit string) binaries.Checkout {
	t.Helper()
	run := func(name string, args ...string) (string, error) {
		var out bytes.Buffer
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if _, err := run("git", "cat-file", "-e", commit+"^{commit}"); err != nil {
		if out, err := run("git", "fetch", "--quiet", "--unshallow"); err != nil {
			t.Fatalf("the upgrade test needs commit %s, which this clone lacks, and fetching the history failed: clone the repository whole (%v)\n%s", commit, err, out)
		}
	}
	dir := t.TempDir()
	if out, err := run("bash", "-o", "pipefail", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "bash", commit, dir); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	return binaries.Checkout{Root: dir, Version: commit[:7], Revision: commit}
}

// helm upgrade from the previous release's chart, running its binaries, to this
// one's: the pods keep their addresses through the upgrade, a pod re-created after
// it (a StatefulSet's) gets its own back, and a new pod gets addresses from the
// upgraded webhook and ipamd.
func TestUpgradeFromThePreviousReleaseKeepsAddresses(t *testing.T) {
	ctx := context.Background()
	const ns = "nicpool-system"
	prev := checkoutAt(t, previousRelease)
	prevChart, err := loader.Load(filepath.Join(prev.Root, manifests.ChartDir))
	if err != nil {
		t.Fatal(err)
	}
	st := upWithChart(t, ns, prevChart, prev)
	before := map[string]map[string][]netip.Addr{}
	uids := map[string]types.UID{}
	for _, p := range runExamples(t, st) {
		before[p.Name] = helmtest.PodAddresses(ctx, t, st, p)
		uids[p.Name] = p.UID
	}
	if t.Failed() {
		t.FailNow()
	}

	cfg := helmtest.Configure(t, &action.Configuration{}, st.AdminKubeconfig, ns)
	current := loadChart(t)
	if err := st.Upgrade(ctx, binaries.Checkout{}, func(ctx context.Context) error {
		up := action.NewUpgrade(cfg)
		// The stack's API server has this checkout's CRDs, SpiderCoordinator's among
		// them, which the previous release's chart did not have: the upgrade adopts it,
		// as on a cluster that kept spiderpool's (docs/install.md, Upgrading).
		up.Namespace, up.TakeOwnership = ns, true
		_, err := up.RunWithContext(ctx, "nicpool", current, standInValues())
		return err
	}); err != nil {
		t.Fatalf("helm upgrade nicpool to this chart: %v", err)
	}
	// What runs is this chart's: the release's manifest is this chart's rendering.
	rel, err := action.NewGet(cfg).Run("nicpool")
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := renderIn(t, ns, standInValues())
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 2 || !reflect.DeepEqual(index(decode(t, rel.Manifest)), index(decode(t, want))) {
		t.Errorf("after the upgrade the release is revision %d, its manifest this chart's: %t", rel.Version, reflect.DeepEqual(index(decode(t, rel.Manifest)), index(decode(t, want))))
	}

	// The pods kept their addresses.
	for _, p := range runningPods(t, st, 3) {
		if p.UID != uids[p.Name] {
			t.Errorf("pod %s was replaced during the upgrade", p.Name)
			continue
		}
		if got := helmtest.PodAddresses(ctx, t, st, p); !reflect.DeepEqual(got, before[p.Name]) {
			t.Errorf("pod %s: addresses %v after the upgrade, %v before", p.Name, got, before[p.Name])
		}
	}
	// A StatefulSet pod deleted after the upgrade comes back with its addresses.
	old := &corev1.Pod{}
	if err := st.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: sampleSet + "-0"}, old); err != nil {
		t.Fatal(err)
	}
	if err := st.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	// A new pod is served by the upgraded webhook and ipamd.
	set := &appsv1.StatefulSet{}
	if err := st.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: sampleSet}, set); err != nil {
		t.Fatal(err)
	}
	// A merge patch: the StatefulSet controller writes the object's status meanwhile,
	// and an update of what was read would conflict with it.
	scale := client.MergeFrom(set.DeepCopy())
	set.Spec.Replicas = ptr(int32(4))
	if err := st.Client.Patch(ctx, set, scale); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "web-0 re-created and web-3 running", func(ctx context.Context) bool {
		n := 0
		for _, p := range runningPods(t, st, 0) {
			if p.Name == sampleSet+"-0" && p.UID == old.UID {
				return false
			}
			n++
		}
		return n == 4
	})
	for _, p := range runningPods(t, st, 4) {
		got := helmtest.PodAddresses(ctx, t, st, p)
		if want, ok := before[p.Name]; ok && !reflect.DeepEqual(got, want) {
			t.Errorf("pod %s: addresses %v after the upgrade, %v before", p.Name, got, want)
		}
	}
	helmtest.CheckInvariants(t, st)
}

func ptr[T any](v T) *T { return &v }
