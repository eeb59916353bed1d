package helm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
	"github.com/nicpool/nicpool/manifests/externalcrds"
)

var root = testenv.RepoRoot()

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(filepath.Join(root, manifests.ChartDir))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// render is `helm template nicpool charts/nicpool --include-crds` with vals.
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace, inst.IncludeCRDs = true, true, true, true
	inst.ReleaseName, inst.Namespace = "nicpool", "default"
	rel, err := inst.Run(loadChart(t), vals)
	if err != nil {
		return nil, err
	}
	return decode(t, rel.Manifest), nil
}

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		// Through JSON, as manifests.Render does, so numbers compare equal.
		j, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		n := &unstructured.Unstructured{}
		if err := n.UnmarshalJSON(j); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
}

func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GroupVersionKind(), o.GetNamespace(), o.GetName())
}

func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[key(o)] = o
	}
	return m
}

func kustomize(t *testing.T, dirs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range dirs {
		objs, err := manifests.Render(filepath.Join(root, manifests.Dir, d))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, objs...)
	}
	return out
}

// sameObjects fails unless helm and kustomize produce the same objects, field by field.
func sameObjects(t *testing.T, helm, kust []*unstructured.Unstructured) {
	t.Helper()
	h, k := index(helm), index(kust)
	var keys []string
	for n := range k {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	for _, n := range keys {
		got, ok := h[n]
		if !ok {
			t.Errorf("helm does not render %s", n)
			continue
		}
		if !reflect.DeepEqual(got.Object, k[n].Object) {
			t.Errorf("%s differs between helm and kustomize:\nhelm: %v\nkustomize: %v", n, got.Object, k[n].Object)
		}
	}
	for n := range h {
		if _, ok := k[n]; !ok {
			t.Errorf("helm renders %s, which kustomize does not", n)
		}
	}
	if len(kust) == 0 {
		t.Fatal("kustomize rendered nothing")
	}
}

// The chart with its default values installs exactly what `kubectl apply -k
// manifests/` installs; each certificate mode and monitoring what their overlays do.
func TestChartRendersTheKustomizations(t *testing.T) {
	cases := []struct {
		name string
		vals map[string]any
		dirs []string
	}{
		{"defaults", nil, []string{"."}},
		{"self-managed", map[string]any{"certificates": map[string]any{"mode": "self-managed"}}, []string{"overlays/self-managed"}},
		{"monitoring", map[string]any{"monitoring": map[string]any{"enabled": true}}, []string{"overlays/cert-manager", manifests.Monitoring}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(t, c.vals)
			if err != nil {
				t.Fatal(err)
			}
			sameObjects(t, objs, kustomize(t, c.dirs...))
		})
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func podSpec(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, ok, err := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if !ok || err != nil {
		t.Fatalf("%s has no pod spec: %v", key(o), err)
	}
	return spec
}

func containerOf(t *testing.T, spec map[string]any, list, name string) map[string]any {
	t.Helper()
	cs, _ := spec[list].([]any)
	for _, c := range cs {
		if m := c.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no %s %s", list, name)
	return nil
}

// Every value says what it changes in the rendered objects.
func TestChartValues(t *testing.T) {
	vals := map[string]any{
		"images": map[string]any{
			"webhook": map[string]any{"repository": "registry.example/nicpool/webhook", "tag": "v1"},
			"ipamd":   map[string]any{"repository": "registry.example/nicpool/ipamd", "tag": "v2"},
			"plugin":  map[string]any{"repository": "registry.example/nicpool/plugin", "tag": "v3"},
		},
		"webhook": map[string]any{
			"replicas":     3,
			"resources":    map[string]any{"limits": map[string]any{"memory": "512Mi"}},
			"nodeSelector": map[string]any{"node-role.kubernetes.io/control-plane": ""},
			"tolerations":  []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
			"logLevel":     "debug",
			"gc":           map[string]any{"interval": "5m", "minAge": "1m", "terminatingGrace": "2m"},
		},
		"ipamd": map[string]any{
			"resources":           map[string]any{"requests": map[string]any{"cpu": "200m"}},
			"installCNIResources": map[string]any{"requests": map[string]any{"cpu": "20m"}},
			"nodeSelector":        map[string]any{"nicpool.io/ipam": "true"},
			"tolerations":         []any{},
			"logLevel":            "error",
		},
	}
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, objs, "Deployment", "nicpool-webhook")
	if r, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); r != 3 {
		t.Errorf("webhook replicas %d, want 3", r)
	}
	ws := podSpec(t, dep)
	wc := containerOf(t, ws, "containers", "webhook")
	if wc["image"] != "registry.example/nicpool/webhook:v1" {
		t.Errorf("webhook image %v", wc["image"])
	}
	// Helm merges maps with the defaults: what is set changes, the rest stays.
	if want := defaultResources(t, "Deployment", "nicpool-webhook", "containers", "webhook", "limits", "memory", "512Mi"); !reflect.DeepEqual(wc["resources"], want) {
		t.Errorf("webhook resources %v", wc["resources"])
	}
	if !reflect.DeepEqual(ws["nodeSelector"], map[string]any{"node-role.kubernetes.io/control-plane": ""}) {
		t.Errorf("webhook nodeSelector %v", ws["nodeSelector"])
	}
	if tol, _ := ws["tolerations"].([]any); len(tol) != 1 {
		t.Errorf("webhook tolerations %v", ws["tolerations"])
	}
	args := fmt.Sprint(wc["args"])
	for _, a := range []string{"--zap-log-level=debug", "--gc-interval=5m", "--gc-min-age=1m", "--gc-terminating-grace=2m"} {
		if !strings.Contains(args, a) {
			t.Errorf("webhook args %s lack %s", args, a)
		}
	}

	ds := find(t, objs, "DaemonSet", "nicpool-ipamd")
	is := podSpec(t, ds)
	ic := containerOf(t, is, "containers", "ipamd")
	if ic["image"] != "registry.example/nicpool/ipamd:v2" {
		t.Errorf("ipamd image %v", ic["image"])
	}
	if want := defaultResources(t, "DaemonSet", "nicpool-ipamd", "containers", "ipamd", "requests", "cpu", "200m"); !reflect.DeepEqual(ic["resources"], want) {
		t.Errorf("ipamd resources %v", ic["resources"])
	}
	if !strings.Contains(fmt.Sprint(ic["args"]), "--zap-log-level=error") {
		t.Errorf("ipamd args %v lack the log level", ic["args"])
	}
	if !reflect.DeepEqual(is["nodeSelector"], map[string]any{"nicpool.io/ipam": "true"}) {
		t.Errorf("ipamd nodeSelector %v", is["nodeSelector"])
	}
	if _, ok := is["tolerations"]; ok {
		t.Errorf("ipamd tolerations %v, want none", is["tolerations"])
	}
	init := containerOf(t, is, "initContainers", "install-cni")
	if init["image"] != "registry.example/nicpool/plugin:v3" {
		t.Errorf("install-cni image %v", init["image"])
	}
	if want := defaultResources(t, "DaemonSet", "nicpool-ipamd", "initContainers", "install-cni", "requests", "cpu", "20m"); !reflect.DeepEqual(init["resources"], want) {
		t.Errorf("install-cni resources %v", init["resources"])
	}
}

// defaultResources are a container's resources as the manifests set them, with one
// quantity changed.
func defaultResources(t *testing.T, kind, name, list, container, section, resource, value string) map[string]any {
	t.Helper()
	o := find(t, kustomize(t, "."), kind, name).DeepCopy()
	r, _ := containerOf(t, podSpec(t, o), list, container)["resources"].(map[string]any)
	if r == nil {
		r = map[string]any{}
	}
	sec, _ := r[section].(map[string]any)
	if sec == nil {
		sec = map[string]any{}
		r[section] = sec
	}
	sec[resource] = value
	return r
}

// A certificate mode the chart does not know is refused with the values to choose from.
func TestChartRefusesAnUnknownCertificateMode(t *testing.T) {
	_, err := render(t, map[string]any{"certificates": map[string]any{"mode": "vault"}})
	if err == nil || !strings.Contains(err.Error(), "certificates.mode") || !strings.Contains(err.Error(), "self-managed") {
		t.Fatalf("err = %v, want a refusal naming certificates.mode and its choices", err)
	}
}

// helm install, upgrade and uninstall on a real API server, as docs/install.md tells
// a user (its helm blocks, in order; an upgrade with --reuse-values before the
// uninstall): the objects come and go with the release, each
// upgrade installs what its values select, and the pools (CRDs kept) stay.
func TestInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()

	// A pool created before nicpool's webhook exists (it is not running here).
	pool := fixtures.CreatePool(t, env.Client, fixtures.Pool("kept", "10.99.0.0/24", []string{"10.99.0.10-10.99.0.20"}))

	cmds, err := docs.Commands(root, docs.Helm)
	if err != nil {
		t.Fatal(err)
	}
	// The page installs and upgrades, then, in its removal section, uninstalls.
	var uninstalls []docs.Command
	for len(cmds) > 0 && strings.HasPrefix(cmds[len(cmds)-1].Line, "helm uninstall ") {
		uninstalls = append([]docs.Command{cmds[len(cmds)-1]}, uninstalls...)
		cmds = cmds[:len(cmds)-1]
	}
	if len(cmds) < 2 || len(uninstalls) != 1 {
		t.Fatalf("docs have helm commands %v then %v, want an install, an upgrade, then an uninstall", cmds, uninstalls)
	}
	cfg := configuration(t, env.Kubeconfig, "default")
	ch := loadChart(t)
	for _, c := range cmds {
		verb, release, chartPath, sets := parseHelm(t, c.Line)
		if release != "nicpool" || filepath.Clean(chartPath) != manifests.ChartDir {
			t.Fatalf("%q: want release nicpool of %s", c.Line, manifests.ChartDir)
		}
		vals := map[string]any{}
		for _, s := range sets {
			if err := strvals.ParseInto(s, vals); err != nil {
				t.Fatalf("%q: --set %s: %v", c.Line, s, err)
			}
		}
		switch verb {
		case "install":
			inst := action.NewInstall(cfg)
			inst.ReleaseName, inst.Namespace = release, "default"
			if _, err := inst.RunWithContext(ctx, ch, vals); err != nil {
				t.Fatalf("%s: %v", c.Line, err)
			}
		case "upgrade":
			up := action.NewUpgrade(cfg)
			up.Namespace = "default"
			if _, err := up.RunWithContext(ctx, release, ch, vals); err != nil {
				t.Fatalf("%s: %v", c.Line, err)
			}
		default:
			t.Fatalf("%q: helm %s is not run by this test", c.Line, verb)
		}
		// What the values select is installed.
		objs, err := render(t, vals)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), u); err != nil {
				t.Errorf("after %s: %s is not installed: %v", c.Line, key(o), err)
			}
		}
	}

	up := action.NewUpgrade(cfg)
	up.Namespace = "default"
	up.ReuseValues = true
	if _, err := up.RunWithContext(ctx, "nicpool", ch, map[string]any{"webhook": map[string]any{"replicas": 3}}); err != nil {
		t.Fatalf("helm upgrade --reuse-values --set webhook.replicas=3: %v", err)
	}
	dep := &appsv1.Deployment{}
	webhook := client.ObjectKey{Namespace: "nicpool-system", Name: "nicpool-webhook"}
	if err := env.Client.Get(ctx, webhook, dep); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 3 {
		t.Errorf("upgraded replicas %d, want 3", *dep.Spec.Replicas)
	}

	if f := strings.Fields(uninstalls[0].Line); len(f) != 3 || f[2] != "nicpool" {
		t.Fatalf("%q: want helm uninstall nicpool", uninstalls[0].Line)
	}
	un := action.NewUninstall(cfg)
	if _, err := un.Run("nicpool"); err != nil {
		t.Fatalf("%s: %v", uninstalls[0].Line, err)
	}
	if err := env.Client.Get(ctx, webhook, dep); !apierrors.IsNotFound(err) {
		t.Errorf("after uninstall the webhook Deployment: %v, want NotFound", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), &v2beta1.SpiderIPPool{}); err != nil {
		t.Errorf("after uninstall the pool: %v, want it kept", err)
	}
}

// parseHelm reads `helm install|upgrade RELEASE CHART [--set k=v]...`.
func parseHelm(t *testing.T, line string) (verb, release, chartPath string, sets []string) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "helm" {
		t.Fatalf("%q is not helm VERB RELEASE CHART", line)
	}
	for i := 4; i < len(f); i++ {
		if f[i] != "--set" || i+1 == len(f) {
			t.Fatalf("%q: only --set k=v options are run by this test", line)
		}
		sets = append(sets, f[i+1])
		i++
	}
	return f[1], f[2], f[3], sets
}

// configuration is Helm's action configuration for the API server of kubeconfig,
// releases stored as Secrets (Helm's default) in the namespace ns.
func configuration(t *testing.T, kubeconfig, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &ns
	cfg := &action.Configuration{}
	var logs bytes.Buffer
	if err := cfg.Init(flags, ns, "secret", func(format string, v ...any) { fmt.Fprintf(&logs, format+"\n", v...) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return cfg
}

// env is the package's one control plane: nicpool's CRDs with cert-manager's and the
// Prometheus operator's beside them, which the chart's objects need. The install test
// and the runbook's uninstall test share it; each keeps to its own releases and pools.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) error {
		certManager, err := externalcrds.CertManager()
		if err != nil {
			return err
		}
		monitoring, err := externalcrds.PrometheusOperator(filepath.Join(testenv.BinDir(), "controller-gen"))
		if err != nil {
			return err
		}
		env, err = s.Start(testenv.Options{ExtraCRDs: append(certManager, monitoring...)})
		return err
	})
}
