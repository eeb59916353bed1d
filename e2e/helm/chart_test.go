package helm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/helmtest"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
	"github.com/nicpool/nicpool/manifests/externalcrds"
	"github.com/nicpool/nicpool/webhook/admission/configs"
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

// releaseNamespace is where the tests install the chart, as docs/install.md does.
const releaseNamespace = "nicpool-system"

// render is `helm template nicpool charts/nicpool -n nicpool-system --kube-version
// 1.37.2` with vals (Helm's SDK assumes Kubernetes 1.20 without a cluster, below the
// chart's kubeVersion).
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	objs, _, err := renderIn(t, releaseNamespace, vals)
	return objs, err
}

// renderIn renders the chart as a release in namespace ns, and returns its manifest too.
func renderIn(t *testing.T, ns string, vals map[string]any) ([]*unstructured.Unstructured, string, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace, inst.IncludeCRDs = true, true, true, true
	inst.ReleaseName, inst.Namespace = "nicpool", ns
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	rel, err := inst.Run(loadChart(t), vals)
	if err != nil {
		return nil, "", err
	}
	return decode(t, rel.Manifest), rel.Manifest, nil
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

// withoutHelmMetadata is a rendered object without what only the chart adds: Helm's
// standard labels (on the object and its pod template) and the CRDs' keep policy.
func withoutHelmMetadata(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	for _, path := range [][]string{{"metadata", "labels"}, {"spec", "template", "metadata", "labels"}} {
		labels, ok, _ := unstructured.NestedStringMap(o.Object, path...)
		if !ok {
			continue
		}
		for _, l := range manifests.HelmLabels() {
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, path...)
		} else {
			_ = unstructured.SetNestedStringMap(o.Object, labels, path...)
		}
	}
	if o.GetKind() == "CustomResourceDefinition" {
		ann := o.GetAnnotations()
		delete(ann, "helm.sh/resource-policy")
		if len(ann) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		} else {
			o.SetAnnotations(ann)
		}
	}
	return o
}

// sameObjects fails unless helm and kustomize produce the same objects, field by
// field, but for what only the chart adds (withoutHelmMetadata) and kustomize's
// Namespace (the chart installs into the release's).
func sameObjects(t *testing.T, helm, kust []*unstructured.Unstructured) {
	t.Helper()
	var hs, ks []*unstructured.Unstructured
	for _, o := range helm {
		hs = append(hs, withoutHelmMetadata(o))
	}
	for _, o := range kust {
		if o.GetKind() != "Namespace" {
			ks = append(ks, o)
		}
	}
	h, k := index(hs), index(ks)
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
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	vals := map[string]any{
		"images": map[string]any{
			"registry":    "registry.example:5000/team",
			"tag":         "v9.9.9",
			"pullPolicy":  "Always",
			"pullSecrets": []any{map[string]any{"name": "registry-login"}},
			"webhook":     map[string]any{"repository": "webhook", "tag": "v1"},
			"ipamd":       map[string]any{"repository": "ipamd", "digest": digest},
			"plugin":      map[string]any{"repository": "plugin"},
		},
		"cniBinDir": "/var/lib/cni/bin",
		// spiderpool-conf's switches, under spiderpool's chart's names: both components.
		"ipam": map[string]any{"enableIPv6": false, "enableStatefulSet": false},
		"webhook": map[string]any{
			"replicas":            3,
			"resources":           map[string]any{"limits": map[string]any{"memory": "1Gi"}},
			"nodeSelector":        map[string]any{"node-role.kubernetes.io/control-plane": ""},
			"tolerations":         []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
			"affinity":            map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}}}}}}},
			"priorityClassName":   "nicpool-critical",
			"logLevel":            "debug",
			"logEncoder":          "console",
			"logTimeEncoding":     "epoch",
			"gc":                  map[string]any{"interval": "5m", "minAge": "1m", "terminatingGrace": "2m"},
			"ports":               map[string]any{"webhook": 10443, "metrics": 10080, "health": 10081},
			"podDisruptionBudget": map[string]any{"minAvailable": 2},
			"extraArgs":           []any{"--cluster-network-nicpool"},
			"extraEnv":            []any{map[string]any{"name": "GODEBUG", "value": "madvdontneed=1"}},
		},
		"ipamd": map[string]any{
			"resources":           map[string]any{"requests": map[string]any{"cpu": "200m"}},
			"installCNIResources": map[string]any{"requests": map[string]any{"cpu": "20m"}},
			"nodeSelector":        map[string]any{"nicpool.io/ipam": "true", "kubernetes.io/os": nil},
			"tolerations":         []any{},
			"affinity":            map[string]any{"podAntiAffinity": map[string]any{}},
			"priorityClassName":   "",
			"logLevel":            "error",
			"ports":               map[string]any{"metrics": 10271, "health": 10272},
			"extraArgs":           []any{"--allocation-order=lowest", "--kube-api-qps=20"},
			"extraEnv":            []any{map[string]any{"name": "GOGC", "value": "50"}},
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
	if wc["image"] != "registry.example:5000/team/webhook:v1" || wc["imagePullPolicy"] != "Always" {
		t.Errorf("webhook image %v, pull policy %v", wc["image"], wc["imagePullPolicy"])
	}
	if !reflect.DeepEqual(ws["imagePullSecrets"], []any{map[string]any{"name": "registry-login"}}) {
		t.Errorf("webhook imagePullSecrets %v", ws["imagePullSecrets"])
	}
	// Helm merges maps with the defaults: what is set changes, the rest stays.
	if want := defaultResources(t, "Deployment", "nicpool-webhook", "containers", "webhook", "limits", "memory", "1Gi"); !reflect.DeepEqual(wc["resources"], want) {
		t.Errorf("webhook resources %v", wc["resources"])
	}
	if !reflect.DeepEqual(ws["nodeSelector"], map[string]any{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/os": "linux"}) {
		t.Errorf("webhook nodeSelector %v, want the value's beside the default kubernetes.io/os", ws["nodeSelector"])
	}
	if tol, _ := ws["tolerations"].([]any); len(tol) != 1 {
		t.Errorf("webhook tolerations %v", ws["tolerations"])
	}
	if !reflect.DeepEqual(ws["affinity"], vals["webhook"].(map[string]any)["affinity"]) {
		t.Errorf("webhook affinity %v", ws["affinity"])
	}
	if ws["priorityClassName"] != "nicpool-critical" {
		t.Errorf("webhook priorityClassName %v", ws["priorityClassName"])
	}
	args := fmt.Sprint(wc["args"])
	for _, a := range []string{"--zap-log-level=debug", "--zap-encoder=console", "--zap-time-encoding=epoch", "--gc-interval=5m", "--gc-min-age=1m", "--gc-terminating-grace=2m",
		"--webhook-port=10443", "--metrics-bind-address=:10080", "--health-probe-bind-address=:10081", "--cluster-network-nicpool",
		"--enable-ipv4=true", "--enable-ipv6=false", "--enable-stateful-set=false"} {
		if !strings.Contains(args, a) {
			t.Errorf("webhook args %s lack %s", args, a)
		}
	}
	if got := ports(t, wc); !reflect.DeepEqual(got, map[string]int64{"webhook": 10443, "metrics": 10080, "health": 10081}) {
		t.Errorf("webhook ports %v", got)
	}
	if got := envOf(wc); got["GODEBUG"] != "madvdontneed=1" || got["GOMEMLIMIT"] != "$(NICPOOL_MEMORY_LIMIT_MIB)000000B" {
		t.Errorf("webhook env %v: want extraEnv's GODEBUG and GOMEMLIMIT from the memory limit", got)
	}
	pdb := find(t, objs, "PodDisruptionBudget", "nicpool-webhook")
	if m, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "minAvailable"); m != 2 {
		t.Errorf("PodDisruptionBudget minAvailable %d, want 2", m)
	}

	ds := find(t, objs, "DaemonSet", "nicpool-ipamd")
	is := podSpec(t, ds)
	ic := containerOf(t, is, "containers", "ipamd")
	if ic["image"] != "registry.example:5000/team/ipamd:v9.9.9@"+digest {
		t.Errorf("ipamd image %v, want the global tag and the digest", ic["image"])
	}
	if want := defaultResources(t, "DaemonSet", "nicpool-ipamd", "containers", "ipamd", "requests", "cpu", "200m"); !reflect.DeepEqual(ic["resources"], want) {
		t.Errorf("ipamd resources %v", ic["resources"])
	}
	iargs := fmt.Sprint(ic["args"])
	for _, a := range []string{"--zap-log-level=error", "--metrics-bind-address=:10271", "--health-probe-bind-address=:10272", "--allocation-order=lowest", "--kube-api-qps=20",
		"--enable-ipv4=true", "--enable-ipv6=false", "--enable-stateful-set=false"} {
		if !strings.Contains(iargs, a) {
			t.Errorf("ipamd args %s lack %s", iargs, a)
		}
	}
	if got := ports(t, ic); !reflect.DeepEqual(got, map[string]int64{"metrics": 10271, "health": 10272}) {
		t.Errorf("ipamd ports %v", got)
	}
	if got := envOf(ic); got["GOGC"] != "50" {
		t.Errorf("ipamd env %v: want extraEnv's GOGC last", got)
	}
	if !reflect.DeepEqual(is["nodeSelector"], map[string]any{"nicpool.io/ipam": "true"}) {
		t.Errorf("ipamd nodeSelector %v (kubernetes.io/os: null removes the default)", is["nodeSelector"])
	}
	if _, ok := is["tolerations"]; ok {
		t.Errorf("ipamd tolerations %v, want none", is["tolerations"])
	}
	if _, ok := is["priorityClassName"]; ok && is["priorityClassName"] != "" {
		t.Errorf("ipamd priorityClassName %v, want none", is["priorityClassName"])
	}
	init := containerOf(t, is, "initContainers", "install-cni")
	if init["image"] != "registry.example:5000/team/plugin:v9.9.9" || init["imagePullPolicy"] != "Always" {
		t.Errorf("install-cni image %v, pull policy %v", init["image"], init["imagePullPolicy"])
	}
	if want := defaultResources(t, "DaemonSet", "nicpool-ipamd", "initContainers", "install-cni", "requests", "cpu", "20m"); !reflect.DeepEqual(init["resources"], want) {
		t.Errorf("install-cni resources %v", init["resources"])
	}
	for _, v := range is["volumes"].([]any) {
		if v := v.(map[string]any); v["name"] == "cni-bin" {
			if p, _, _ := unstructured.NestedString(v, "hostPath", "path"); p != "/var/lib/cni/bin" {
				t.Errorf("cni-bin host path %s, want cniBinDir", p)
			}
		}
	}

	// The switches: no budget, no CRDs.
	objs, err = render(t, map[string]any{"webhook": map[string]any{"replicas": 1, "podDisruptionBudget": map[string]any{"enabled": false}}, "crds": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "PodDisruptionBudget" || o.GetKind() == "CustomResourceDefinition" {
			t.Errorf("webhook.podDisruptionBudget.enabled=false crds.enabled=false still render %s", key(o))
		}
	}
}

// The defaults name the images the release publishes: ghcr.io/nicpool, tagged with
// the chart's appVersion, as the kustomize manifests do.
func TestChartDefaultImages(t *testing.T) {
	objs, err := render(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := loadChart(t).Metadata.AppVersion
	if app != manifests.AppVersion || strings.Contains(app, "dev") {
		t.Fatalf("appVersion %q, want %s", app, manifests.AppVersion)
	}
	want := map[string]string{
		"webhook":     "ghcr.io/nicpool/nicpool-webhook:" + app,
		"ipamd":       "ghcr.io/nicpool/nicpool-ipamd:" + app,
		"install-cni": "ghcr.io/nicpool/nicpool:" + app,
	}
	seen := 0
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		spec := podSpec(t, o)
		for _, list := range []string{"containers", "initContainers"} {
			cs, _ := spec[list].([]any)
			for _, c := range cs {
				c := c.(map[string]any)
				if c["image"] != want[c["name"].(string)] {
					t.Errorf("%s container %s: image %v, want %s", key(o), c["name"], c["image"], want[c["name"].(string)])
				}
				seen++
			}
		}
	}
	if seen != 3 {
		t.Errorf("%d containers, want 3", seen)
	}
}

// In any namespace: every namespaced object, the admission policies' service
// accounts, the webhook configurations' Service and excluded namespace, the
// certificate's names and the RBAC subjects name the release's namespace, and
// nothing names nicpool-system.
func TestChartFollowsTheReleaseNamespace(t *testing.T) {
	const ns = "some-other-namespace"
	for _, mode := range []string{"cert-manager", "self-managed"} {
		t.Run(mode, func(t *testing.T) {
			objs, manifest, err := renderIn(t, ns, map[string]any{"certificates": map[string]any{"mode": mode}, "monitoring": map[string]any{"enabled": true}})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(manifest, "nicpool-system") {
				i := strings.Index(manifest, "nicpool-system")
				t.Errorf("the manifest names nicpool-system: …%s…", manifest[max(0, i-200):i+50])
			}
			policies := 0
			for _, o := range objs {
				switch o.GetKind() {
				case "Namespace":
					t.Errorf("the chart renders the Namespace %s: Helm's --create-namespace makes it", o.GetName())
				case "ValidatingAdmissionPolicy":
					y := fmt.Sprint(o.Object["spec"])
					if !strings.Contains(y, "system:serviceaccount:") {
						continue // a policy on tenants' objects, not nicpool's writers
					}
					policies++
					if !strings.Contains(y, "system:serviceaccount:"+ns+":nicpool-ipamd") || !strings.Contains(y, "system:serviceaccount:"+ns+":nicpool-webhook") {
						t.Errorf("policy %s does not name the service accounts of %s: %s", o.GetName(), ns, y)
					}
				case "ClusterRoleBinding", "RoleBinding":
					subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
					for _, sub := range subjects {
						if sub := sub.(map[string]any); sub["kind"] == "ServiceAccount" && sub["namespace"] != ns {
							t.Errorf("%s binds %v", key(o), sub)
						}
					}
				}
				if o.GetNamespace() != "" && o.GetNamespace() != ns {
					t.Errorf("%s is in namespace %s, want %s", key(o), o.GetNamespace(), ns)
				}
			}
			if policies < 3 {
				t.Errorf("%d ValidatingAdmissionPolicies name nicpool's service accounts, want the endpoints', pool status' and blocks'", policies)
			}
			for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				for _, o := range objs {
					if o.GetKind() != kind {
						continue
					}
					y := fmt.Sprint(o.Object["webhooks"])
					if !strings.Contains(y, "namespace:"+ns) || !strings.Contains(y, "values:[kube-system "+ns+"]") {
						t.Errorf("%s: %s, want the Service and the excluded namespace %s", key(o), y, ns)
					}
				}
			}
		})
	}
}

// values.schema.json refuses a value the chart does not have, and values of the
// wrong type, naming them.
func TestChartSchemaRefusesUnknownValues(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"webhook": map[string]any{"replica": 1}}, "replica"},
		{map[string]any{"replicas": 1}, "replicas"},
		{map[string]any{"images": map[string]any{"webhook": map[string]any{"digest": "latest"}}}, "digest"},
		{map[string]any{"webhook": map[string]any{"replicas": "two"}}, "replicas"},
		{map[string]any{"webhook": map[string]any{"podDisruptionBudget": map[string]any{"enable": false}}}, "enable"},
		{map[string]any{"ipamd": map[string]any{"extraArgs": "--kube-api-qps=20"}}, "extraArgs"},
		{map[string]any{"certificates": map[string]any{"mode": "vault"}}, "mode"},
	} {
		_, err := render(t, c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: err = %v, want a refusal naming %s", c.vals, err, c.want)
		}
	}
	// Free-form maps take any key.
	if _, err := render(t, map[string]any{"webhook": map[string]any{"nodeSelector": map[string]any{"any/key": "x"}, "resources": map[string]any{"limits": map[string]any{"cpu": "1"}}}}); err != nil {
		t.Errorf("free-form values refused: %v", err)
	}
}

// Every object carries the standard labels, with the chart's name and version.
func TestChartLabels(t *testing.T) {
	objs, err := render(t, map[string]any{"monitoring": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	ch := loadChart(t)
	for _, o := range objs {
		l := o.GetLabels()
		chartLabel := ch.Metadata.Name + "-" + ch.Metadata.Version
		if o.GetKind() == "CustomResourceDefinition" {
			chartLabel = "nicpool-crds-" + ch.Metadata.Version
		}
		want := map[string]string{"helm.sh/chart": chartLabel, "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": "nicpool", "app.kubernetes.io/version": ch.Metadata.AppVersion}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("%s: label %s=%q, want %q", key(o), k, l[k], v)
			}
		}
	}
}

// The chart says the Kubernetes it needs, and Helm refuses an older one.
func TestChartKubeVersion(t *testing.T) {
	if kv := loadChart(t).Metadata.KubeVersion; kv != ">=1.31.0-0" {
		t.Fatalf("kubeVersion %q", kv)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = "nicpool", releaseNamespace
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.30.9", Major: "1", Minor: "30"}
	if _, err := inst.Run(loadChart(t), nil); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("install on 1.30: err = %v, want a refusal naming kubeVersion", err)
	}
}

func ports(t *testing.T, c map[string]any) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	ps, _ := c["ports"].([]any)
	for _, p := range ps {
		p := p.(map[string]any)
		n, _ := p["containerPort"].(int64)
		out[p["name"].(string)] = n
	}
	return out
}

// envOf is a container's literal environment; a variable set twice keeps the last.
func envOf(c map[string]any) map[string]string {
	out := map[string]string{}
	es, _ := c["env"].([]any)
	for _, e := range es {
		e := e.(map[string]any)
		if v, ok := e["value"].(string); ok {
			out[e["name"].(string)] = v
		}
	}
	return out
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
	// values.schema.json refuses it before the templates' own check would.
	if err == nil || !strings.Contains(err.Error(), "/certificates/mode") || !strings.Contains(err.Error(), "self-managed") {
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
	cfg := helmtest.Configure(t, &action.Configuration{}, env.Kubeconfig, releaseNamespace)
	ch := loadChart(t)
	for _, c := range cmds {
		if f := strings.Fields(c.Line); len(f) > 1 && f[1] == "rollback" {
			if len(f) != 5 || f[2] != "nicpool" || f[3] != "-n" || f[4] != releaseNamespace {
				t.Fatalf("%q: want helm rollback nicpool -n %s", c.Line, releaseNamespace)
			}
			if err := action.NewRollback(cfg).Run("nicpool"); err != nil {
				t.Fatalf("%s: %v", c.Line, err)
			}
			continue
		}
		h := parseHelm(t, c.Line)
		if h.release != "nicpool" || filepath.Clean(h.chart) != manifests.ChartDir || h.namespace != releaseNamespace {
			t.Fatalf("%q: want release nicpool of %s in %s", c.Line, manifests.ChartDir, releaseNamespace)
		}
		vals := map[string]any{}
		for _, s := range h.sets {
			if err := strvals.ParseInto(s, vals); err != nil {
				t.Fatalf("%q: --set %s: %v", c.Line, s, err)
			}
		}
		switch h.verb {
		case "install":
			inst := action.NewInstall(cfg)
			inst.ReleaseName, inst.Namespace = h.release, h.namespace
			inst.CreateNamespace, inst.TakeOwnership = h.createNamespace, h.takeOwnership
			if _, err := inst.RunWithContext(ctx, ch, vals); err != nil {
				t.Fatalf("%s: %v", c.Line, err)
			}
		case "upgrade":
			up := action.NewUpgrade(cfg)
			up.Namespace, up.TakeOwnership = h.namespace, h.takeOwnership
			if _, err := up.RunWithContext(ctx, h.release, ch, vals); err != nil {
				t.Fatalf("%s: %v", c.Line, err)
			}
		default:
			t.Fatalf("%q: helm %s is not run by this test", c.Line, h.verb)
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

	// An upgrade applies the CRDs of the new chart (a sub-chart's templates, not
	// crds/, which Helm never upgrades): here a CRD with one more label.
	newer := loadChart(t)
	const crdName = "ipblocks.ipam.nicpool.io"
	for _, dep := range newer.Dependencies() {
		for _, tf := range dep.Templates {
			if strings.Contains(tf.Name, crdName) {
				tf.Data = bytes.Replace(tf.Data, []byte("  labels:\n"), []byte("  labels:\n    nicpool.io/upgraded: \"true\"\n"), 1)
			}
		}
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = releaseNamespace
	up.ReuseValues = true
	if _, err := up.RunWithContext(ctx, "nicpool", newer, map[string]any{"webhook": map[string]any{"replicas": 3}}); err != nil {
		t.Fatalf("helm upgrade --reuse-values --set webhook.replicas=3: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Labels["nicpool.io/upgraded"] != "true" {
		t.Errorf("after the upgrade the CRD %s has labels %v: the new chart's CRD was not applied", crdName, crd.Labels)
	}
	dep := &appsv1.Deployment{}
	webhook := client.ObjectKey{Namespace: releaseNamespace, Name: "nicpool-webhook"}
	if err := env.Client.Get(ctx, webhook, dep); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 3 {
		t.Errorf("upgraded replicas %d, want 3", *dep.Spec.Replicas)
	}

	// Rollback: the previous revision's objects come back.
	rb := action.NewRollback(cfg)
	if err := rb.Run("nicpool"); err != nil {
		t.Fatalf("helm rollback nicpool: %v", err)
	}
	if err := env.Client.Get(ctx, webhook, dep); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas == 3 {
		t.Errorf("after the rollback the webhook has %d replicas, want the previous revision's", *dep.Spec.Replicas)
	}

	if f := strings.Fields(uninstalls[0].Line); len(f) < 3 || f[2] != "nicpool" {
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
	if err := env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Errorf("after uninstall the CRD %s: %v, want it kept (helm.sh/resource-policy: keep)", crdName, err)
	}
}

// helm install -n some-other-namespace --create-namespace on a real API server: Helm
// makes the namespace, everything namespaced lands in it, and the admission policies
// and RBAC let that namespace's ipamd service account write allocation records (while
// they refuse everyone else).
func TestInstallInAnotherNamespace(t *testing.T) {
	ctx := context.Background()
	const ns = "some-other-namespace"
	cfg := helmtest.Configure(t, &action.Configuration{}, env.Kubeconfig, ns)
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = "nicpool", ns, true
	// The API server has nicpool's CRDs already (as after a kustomize install).
	inst.TakeOwnership = true
	if _, err := inst.RunWithContext(ctx, loadChart(t), map[string]any{"certificates": map[string]any{"mode": "self-managed"}}); err != nil {
		t.Fatalf("helm install nicpool -n %s --create-namespace: %v", ns, err)
	}
	t.Cleanup(func() {
		if _, err := action.NewUninstall(cfg).Run("nicpool"); err != nil {
			t.Errorf("helm uninstall nicpool -n %s: %v", ns, err)
		}
	})
	objs, _, err := renderIn(t, ns, map[string]any{"certificates": map[string]any{"mode": "self-managed"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), u); err != nil {
			t.Errorf("%s is not installed: %v", key(o), err)
		}
	}
	// ipamd's service account of the release's namespace, with the node its pod-bound
	// token names (node-a) and without.
	ipamdOn := func(node string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + ns + ":nicpool-ipamd",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		}
		if node != "" {
			cfg.Impersonate.Extra = map[string][]string{configs.NodeNameExtra: {node}}
		}
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	block := func() *ipamv1alpha1.IPBlock {
		return &ipamv1alpha1.IPBlock{ObjectMeta: metav1.ObjectMeta{Name: "probe.10.254.0.0"}, Spec: ipamv1alpha1.IPBlockSpec{Pool: "probe", CIDR: "10.254.0.0/28", Node: "node-a"}}
	}
	// The IPBlock policy knows this namespace's account as ipamd's: it asks it for
	// the node its token names, which it asks of ipamd alone (RBAC lets it write).
	fixtures.Eventually(t, "the chart's IPBlock policy recognises ipamd of "+ns, func(ctx context.Context) bool {
		err := ipamdOn("").Create(ctx, block(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+configs.BlocksPolicy+"'") && strings.Contains(err.Error(), "name no node")
	})
	if err := ipamdOn("node-a").Create(ctx, block(), client.DryRunAll); err != nil {
		t.Errorf("ipamd of namespace %s claims an empty block of its node: %v", ns, err)
	}
}

// helmCommand is one `helm install|upgrade` line of the docs.
type helmCommand struct {
	verb, release, chart, namespace string
	createNamespace, takeOwnership  bool
	sets                            []string
}

// parseHelm reads `helm install|upgrade RELEASE CHART [-n NS] [--create-namespace]
// [--take-ownership] [--set k=v]...`.
func parseHelm(t *testing.T, line string) helmCommand {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "helm" {
		t.Fatalf("%q is not helm VERB RELEASE CHART", line)
	}
	h := helmCommand{verb: f[1], release: f[2], chart: f[3], namespace: "default"}
	for i := 4; i < len(f); i++ {
		switch {
		case (f[i] == "--set" || f[i] == "-n" || f[i] == "--namespace") && i+1 < len(f):
			if f[i] == "--set" {
				h.sets = append(h.sets, f[i+1])
			} else {
				h.namespace = f[i+1]
			}
			i++
		case f[i] == "--create-namespace":
			h.createNamespace = true
		case f[i] == "--take-ownership":
			h.takeOwnership = true
		default:
			t.Fatalf("%q: %s is not an option this test runs", line, f[i])
		}
	}
	return h
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

// Every monitoring object takes the labels, namespace and interval its values give
// (kube-prometheus-stack loads only monitors and rules labelled release: <its
// release>), the monitors keep selecting nicpool's pods in the release's namespace
// from the namespace they are put in, and the dashboard ConfigMap gets the labels
// and annotations Grafana's sidecar looks for, in the sidecar's namespace. The API
// server, with the Prometheus Operator's CRDs, accepts each object so rendered.
func TestChartMonitoringValues(t *testing.T) {
	defaults, err := render(t, map[string]any{"monitoring": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	dash := find(t, defaults, "ConfigMap", "nicpool-dashboard")
	if dash.GetLabels()["grafana_dashboard"] != "1" || dash.GetNamespace() != releaseNamespace || len(dash.GetAnnotations()) != 0 {
		t.Errorf("default dashboard ConfigMap: namespace %s, labels %v, annotations %v; want %s, grafana_dashboard=1 (Grafana's sidecar default), no annotation",
			dash.GetNamespace(), dash.GetLabels(), dash.GetAnnotations(), releaseNamespace)
	}
	for _, kn := range [][2]string{{"ServiceMonitor", "nicpool-webhook"}, {"PodMonitor", "nicpool-ipamd"}, {"PrometheusRule", "nicpool"}} {
		if got := intervals(t, find(t, defaults, kn[0], kn[1])); !reflect.DeepEqual(got, []string{"30s"}) {
			t.Errorf("default %s %s intervals %v, want 30s", kn[0], kn[1], got)
		}
	}

	vals := map[string]any{"monitoring": map[string]any{
		"enabled":        true,
		"serviceMonitor": map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack"}, "namespace": "monitoring", "interval": "15s"},
		"podMonitor":     map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack", "team": "network"}, "namespace": "monitoring", "interval": "20s"},
		"prometheusRule": map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack"}, "namespace": "alerts", "interval": "1m"},
		"dashboard": map[string]any{
			"labels":      map[string]any{"grafana_dashboard": "nicpool"},
			"namespace":   "grafana",
			"annotations": map[string]any{"grafana_folder": "Networking"},
		},
	}}
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind, name, namespace, interval string
		labels                          map[string]string
	}{
		{"ServiceMonitor", "nicpool-webhook", "monitoring", "15s", map[string]string{"release": "kube-prometheus-stack"}},
		{"PodMonitor", "nicpool-ipamd", "monitoring", "20s", map[string]string{"release": "kube-prometheus-stack", "team": "network"}},
		{"PrometheusRule", "nicpool", "alerts", "1m", map[string]string{"release": "kube-prometheus-stack"}},
	} {
		o := find(t, objs, c.kind, c.name)
		if o.GetNamespace() != c.namespace {
			t.Errorf("%s: namespace %s, want %s", key(o), o.GetNamespace(), c.namespace)
		}
		for k, v := range c.labels {
			if o.GetLabels()[k] != v {
				t.Errorf("%s: labels %v, want %s=%s", key(o), o.GetLabels(), k, v)
			}
		}
		if o.GetLabels()["app.kubernetes.io/part-of"] != "nicpool" {
			t.Errorf("%s: labels %v lost app.kubernetes.io/part-of=nicpool", key(o), o.GetLabels())
		}
		if got := intervals(t, o); !reflect.DeepEqual(got, []string{c.interval}) {
			t.Errorf("%s: intervals %v, want %s", key(o), got, c.interval)
		}
		if c.kind != "PrometheusRule" {
			names, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "namespaceSelector", "matchNames")
			if !reflect.DeepEqual(names, []string{releaseNamespace}) {
				t.Errorf("%s in namespace %s selects namespaces %v, want nicpool's %s", key(o), o.GetNamespace(), names, releaseNamespace)
			}
		}
	}
	dash = find(t, objs, "ConfigMap", "nicpool-dashboard")
	if dash.GetNamespace() != "grafana" || dash.GetLabels()["grafana_dashboard"] != "nicpool" || dash.GetAnnotations()["grafana_folder"] != "Networking" {
		t.Errorf("dashboard ConfigMap: namespace %s, labels %v, annotations %v; want grafana, grafana_dashboard=nicpool, grafana_folder=Networking",
			dash.GetNamespace(), dash.GetLabels(), dash.GetAnnotations())
	}
	// Nothing else moved: the installation's objects stay in the release's namespace.
	for _, o := range objs {
		if _, monitoring := map[string]bool{"ServiceMonitor": true, "PodMonitor": true, "PrometheusRule": true}[o.GetKind()]; monitoring || key(o) == key(dash) {
			continue
		}
		if o.GetNamespace() != "" && o.GetNamespace() != releaseNamespace {
			t.Errorf("%s is in namespace %s, want %s", key(o), o.GetNamespace(), releaseNamespace)
		}
	}

	ctx := context.Background()
	for _, ns := range []string{"monitoring", "alerts", "grafana"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		if _, monitoring := map[string]bool{"ServiceMonitor": true, "PodMonitor": true, "PrometheusRule": true}[o.GetKind()]; !monitoring && key(o) != key(dash) {
			continue
		}
		if err := env.Client.Create(ctx, o.DeepCopy(), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Errorf("API server refused %s: %v", key(o), err)
			continue
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o.DeepCopy()) })
	}
}

// intervals are the distinct scrape intervals of a monitor's endpoints, or the
// evaluation intervals of a PrometheusRule's groups.
func intervals(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	field := map[string]string{"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints", "PrometheusRule": "groups"}[o.GetKind()]
	items, _, err := unstructured.NestedSlice(o.Object, "spec", field)
	if err != nil || len(items) == 0 {
		t.Fatalf("%s: no spec.%s: %v", key(o), field, err)
	}
	var out []string
	for _, it := range items {
		v, _ := it.(map[string]any)["interval"].(string)
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
