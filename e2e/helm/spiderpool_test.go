package helm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/helmtest"
)

// spiderpoolCleanupHook stands for the Job of spiderpool's chart that runs
// `spiderpool-controller clean` before an uninstall and deletes spiderpool's CRDs with
// every pool in them. It is rendered under the same value as spiderpool's; here it is a
// ConfigMap (no controller runs Jobs on this API server) that Helm leaves in place once
// the hook ran, so that its presence says the cleanup would have run.
const spiderpoolCleanupHook = `{{- if .Values.spiderpoolController.cleanup.enable }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-hook-pre-delete
  annotations:
    "helm.sh/hook": pre-delete
data:
  command: spiderpool-controller clean
{{- end }}
`

// spiderpoolChart is a stand-in for spiderpool's chart, as far as its uninstall goes:
// the spiderpool CRDs in crds/ (their names are returned), an object of the release,
// and the cleanup hook on by default.
func spiderpoolChart(t *testing.T) (*chart.Chart, []string) {
	t.Helper()
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "spiderpool", Version: "0.0.0-standin"},
		Values: map[string]any{
			"spiderpoolController": map[string]any{"cleanup": map[string]any{"enable": true}},
		},
		Templates: []*chart.File{
			{Name: "templates/configmap.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: spiderpool-conf\ndata: {}\n")},
			{Name: "templates/deleteHook.yaml", Data: []byte(spiderpoolCleanupHook)},
		},
	}
	crds, err := filepath.Glob(filepath.Join(root, "crds", "yaml", "spiderpool.spidernet.io_*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("spiderpool's CRDs in crds/yaml: %v %v", crds, err)
	}
	var names []string
	for _, p := range crds {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil || crd.Name == "" {
			t.Fatalf("%s: %v", p, err)
		}
		names = append(names, crd.Name)
		ch.Files = append(ch.Files, &chart.File{Name: "crds/" + filepath.Base(p), Data: data})
	}
	return ch, names
}

// uninstallArgs reads `helm uninstall RELEASE [-n|--namespace NS] [--no-hooks]`.
func uninstallArgs(t *testing.T, line string) (release, namespace string, noHooks bool) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "helm" || f[1] != "uninstall" {
		t.Fatalf("%q is not helm uninstall RELEASE", line)
	}
	release, namespace = f[2], "default"
	for i := 3; i < len(f); i++ {
		switch a := f[i]; {
		case (a == "-n" || a == "--namespace") && i+1 < len(f):
			namespace = f[i+1]
			i++
		case strings.HasPrefix(a, "--namespace="):
			namespace = strings.TrimPrefix(a, "--namespace=")
		case a == "--no-hooks":
			noHooks = true
		default:
			t.Fatalf("%q: %s is not an option this test runs (-n, --namespace, --no-hooks)", line, a)
		}
	}
	return release, namespace, noHooks
}

// The migration runbook's uninstall of spiderpool's release, as it is written, keeps
// the CRDs and the pools: the release's objects go, and the cleanup hook does not run.
// A plain `helm uninstall` of the same release runs it, which is what the runbook's
// command avoids.
func TestRunbookUninstallsSpiderpoolKeepingPools(t *testing.T) {
	ctx := context.Background()
	ch, crds := spiderpoolChart(t)

	pool := fixtures.CreatePool(t, env.Client, fixtures.Pool("under-spiderpool", "10.98.0.0/24", []string{"10.98.0.10-10.98.0.20"}))

	// install installs the stand-in as spiderpool's chart is installed: defaults.
	install := func(release, namespace string) *action.Configuration {
		t.Helper()
		cfg := helmtest.Configure(t, &action.Configuration{}, env.Kubeconfig, namespace)
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace = release, namespace
		if _, err := inst.RunWithContext(ctx, ch, nil); err != nil {
			t.Fatalf("install the spiderpool stand-in as %s/%s: %v", namespace, release, err)
		}
		return cfg
	}
	// after checks what an uninstall of release left: the release's objects gone, the
	// CRDs and the pool kept, and whether the cleanup hook ran.
	after := func(what, release, namespace string, hookRan bool) {
		t.Helper()
		key := client.ObjectKey{Namespace: namespace, Name: "spiderpool-conf"}
		if err := env.Client.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("after %s: the release's ConfigMap %s: %v, want it deleted", what, key, err)
		}
		hook := client.ObjectKey{Namespace: namespace, Name: release + "-hook-pre-delete"}
		err := env.Client.Get(ctx, hook, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		switch ran := err == nil; {
		case hookRan && !ran:
			t.Errorf("after %s: the cleanup hook did not run", what)
		case !hookRan && ran:
			t.Errorf("after %s: the cleanup hook ran, which deletes spiderpool's CRDs and every pool", what)
		}
		for _, name := range crds {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				t.Errorf("after %s: CRD %s: %v, want it kept", what, name, err)
			}
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), &v2beta1.SpiderIPPool{}); err != nil {
			t.Errorf("after %s: the pool %s: %v, want it kept", what, pool.Name, err)
		}
	}

	cmds, err := docs.Commands(root, docs.SpiderpoolRelease)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("no page has a spiderpool-release block: the runbook's uninstall lost its marker")
	}
	for _, c := range cmds {
		release, namespace, noHooks := uninstallArgs(t, c.Line)
		cfg := install(release, namespace)
		un := action.NewUninstall(cfg)
		un.DisableHooks = noHooks
		if _, err := un.Run(release); err != nil {
			t.Fatalf("%s (%s): %v", c.Line, c.Where, err)
		}
		after(c.Line, release, namespace, false)
	}

	// The same release uninstalled without --no-hooks: the stand-in's hook runs, as
	// spiderpool's would.
	cfg := install("spiderpool", "default")
	if _, err := action.NewUninstall(cfg).Run("spiderpool"); err != nil {
		t.Fatalf("helm uninstall spiderpool: %v", err)
	}
	after("helm uninstall spiderpool", "spiderpool", "default", true)
}
