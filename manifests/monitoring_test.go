package manifests_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
)

// The monitoring overlay's objects are valid Prometheus Operator resources: the API
// server, with the operator's CRDs installed, accepts each one with strict field
// validation (an unknown or misspelt field is refused, not dropped).
func TestMonitoringOverlayIsAcceptedByTheAPIServer(t *testing.T) {
	e := controlPlane(t)
	ctx := context.Background()
	objs := render(t, manifests.Monitoring)
	apply(t, e.Client, kinds(render(t, "."), "Namespace"))
	for _, o := range objs {
		if err := e.Client.Create(ctx, o.DeepCopy(), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Errorf("API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	remove(t, e.Client, objs)
}

// The monitoring overlay scrapes what the installation runs: its ServiceMonitor
// selects the webhook's Service and a port it serves metrics on, its PodMonitor the
// ipamd pods and their metrics port; the dashboard is a Grafana dashboard in a
// ConfigMap Grafana's sidecar loads.
func TestMonitoringOverlayTargetsTheInstallation(t *testing.T) {
	objs := render(t, manifests.Monitoring)
	install := render(t, ".")
	for _, o := range objs {
		if o.GetNamespace() != namespace || o.GetLabels()["app.kubernetes.io/part-of"] != "nicpool" {
			t.Errorf("%s %s: namespace %q, labels %v; want %s and app.kubernetes.io/part-of=nicpool", o.GetKind(), o.GetName(), o.GetNamespace(), o.GetLabels(), namespace)
		}
	}

	sm := one(t, objs, "ServiceMonitor")
	svc := object[corev1.Service](t, install, "Service", "nicpool-webhook")
	webhook := object[appsv1.Deployment](t, install, "Deployment", "nicpool-webhook")
	if !selects(t, sm, "spec", "selector")(svc.Labels) {
		t.Errorf("ServiceMonitor %s does not select Service %s (labels %v)", sm.GetName(), svc.Name, svc.Labels)
	}
	for _, port := range endpointPorts(t, sm, "endpoints") {
		var target *intstr.IntOrString
		for _, p := range svc.Spec.Ports {
			if p.Name == port {
				target = &p.TargetPort
			}
		}
		if target == nil {
			t.Errorf("ServiceMonitor port %q is no port of Service %s", port, svc.Name)
			continue
		}
		c := webhook.Spec.Template.Spec.Containers[0]
		if portNumber(c, *target) != metricsPort(t, c.Args) {
			t.Errorf("ServiceMonitor port %q reaches container port %d, the webhook serves metrics on %s", port, portNumber(c, *target), argValue(c.Args, "--metrics-bind-address"))
		}
	}

	pm := one(t, objs, "PodMonitor")
	ipamd := object[appsv1.DaemonSet](t, install, "DaemonSet", "nicpool-ipamd")
	if !selects(t, pm, "spec", "selector")(ipamd.Spec.Template.Labels) {
		t.Errorf("PodMonitor %s does not select the ipamd pods (labels %v)", pm.GetName(), ipamd.Spec.Template.Labels)
	}
	c := ipamd.Spec.Template.Spec.Containers[0]
	for _, port := range endpointPorts(t, pm, "podMetricsEndpoints") {
		if portNumber(c, intstr.FromString(port)) != metricsPort(t, c.Args) {
			t.Errorf("PodMonitor port %q is not the port ipamd serves metrics on (%s)", port, argValue(c.Args, "--metrics-bind-address"))
		}
	}

	// The monitors name nicpool's namespace, so that one moved to another namespace
	// (the chart's monitoring.*.namespace) still scrapes nicpool's pods.
	for _, m := range []*unstructured.Unstructured{sm, pm} {
		names, _, _ := unstructured.NestedStringSlice(m.Object, "spec", "namespaceSelector", "matchNames")
		if len(names) != 1 || names[0] != namespace {
			t.Errorf("%s %s selects namespaces %v, want nicpool's %s", m.GetKind(), m.GetName(), names, namespace)
		}
	}

	cm := object[corev1.ConfigMap](t, objs, "ConfigMap", "nicpool-dashboard")
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v: Grafana's sidecar loads grafana_dashboard=1", cm.Labels)
	}
	if len(cm.Data) != 1 {
		t.Fatalf("dashboard ConfigMap holds %d files, want 1", len(cm.Data))
	}
	for name, data := range cm.Data {
		var d struct {
			UID, Title string
			Panels     []json.RawMessage
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil || d.UID == "" || len(d.Panels) == 0 {
			t.Errorf("%s is no Grafana dashboard (uid %q, %d panels): %v", name, d.UID, len(d.Panels), err)
		}
	}
	one(t, objs, "PrometheusRule")
}

func one(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := kinds(objs, kind)
	if len(found) != 1 {
		t.Fatalf("want one %s, rendered %d", kind, len(found))
	}
	return found[0]
}

// selects returns the label selector at path of o as a predicate.
func selects(t *testing.T, o *unstructured.Unstructured, path ...string) func(map[string]string) bool {
	t.Helper()
	raw, found, err := unstructured.NestedMap(o.Object, path...)
	if err != nil || !found {
		t.Fatalf("%s %s: no %s", o.GetKind(), o.GetName(), strings.Join(path, "."))
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	return func(l map[string]string) bool { return !sel.Empty() && sel.Matches(labels.Set(l)) }
}

// endpointPorts lists the port names of a monitor's scrape endpoints.
func endpointPorts(t *testing.T, o *unstructured.Unstructured, field string) []string {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(o.Object, "spec", field)
	var ports []string
	for _, ep := range eps {
		m, _ := ep.(map[string]any)
		p, _ := m["port"].(string)
		if p == "" {
			t.Errorf("%s %s: an endpoint without a named port", o.GetKind(), o.GetName())
		}
		ports = append(ports, p)
	}
	if len(ports) == 0 {
		t.Errorf("%s %s scrapes nothing", o.GetKind(), o.GetName())
	}
	return ports
}

// metricsPort is the port of --metrics-bind-address ("host:port" or ":port").
func metricsPort(t *testing.T, args []string) int32 {
	t.Helper()
	addr := argValue(args, "--metrics-bind-address")
	_, port, ok := strings.Cut(addr, ":")
	if !ok {
		t.Fatalf("--metrics-bind-address %q has no port", addr)
	}
	return int32(atoi(t, port))
}

// examples/monitoring is kustomize's counterpart of the chart's monitoring values:
// it moves the monitors and rules to kube-prometheus-stack's namespace with its
// release label, scrapes and evaluates every 15 seconds, and puts the dashboard where
// Grafana's sidecar looks, in a folder; the monitors still select nicpool's pods, and
// the API server accepts every object so changed.
func TestMonitoringKustomizeExample(t *testing.T) {
	objs, err := manifests.Render(filepath.Join(testenv.RepoRoot(), "examples", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(objs), len(render(t, manifests.Monitoring)); got != want {
		t.Fatalf("the example renders %d objects, the overlay %d", got, want)
	}
	for _, o := range objs {
		if o.GetLabels()["release"] != "kube-prometheus-stack" || o.GetLabels()["app.kubernetes.io/part-of"] != "nicpool" {
			t.Errorf("%s %s: labels %v, want release=kube-prometheus-stack beside app.kubernetes.io/part-of=nicpool", o.GetKind(), o.GetName(), o.GetLabels())
		}
		var intervals []string
		switch o.GetKind() {
		case "ServiceMonitor", "PodMonitor":
			names, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "namespaceSelector", "matchNames")
			if len(names) != 1 || names[0] != namespace {
				t.Errorf("%s %s selects namespaces %v, want nicpool's %s", o.GetKind(), o.GetName(), names, namespace)
			}
			field := map[string]string{"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints"}[o.GetKind()]
			eps, _, _ := unstructured.NestedSlice(o.Object, "spec", field)
			for _, ep := range eps {
				intervals = append(intervals, fmt.Sprint(ep.(map[string]any)["interval"]))
			}
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
			for _, g := range groups {
				intervals = append(intervals, fmt.Sprint(g.(map[string]any)["interval"]))
			}
		case "ConfigMap":
			if o.GetNamespace() != "grafana" || o.GetLabels()["grafana_dashboard"] != "1" || o.GetAnnotations()["grafana_folder"] != "Networking" {
				t.Errorf("dashboard ConfigMap: namespace %s, labels %v, annotations %v; want grafana, grafana_dashboard=1, grafana_folder=Networking", o.GetNamespace(), o.GetLabels(), o.GetAnnotations())
			}
			continue
		}
		if o.GetNamespace() != "monitoring" {
			t.Errorf("%s %s: namespace %s, want monitoring", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		if len(intervals) == 0 || slices.ContainsFunc(intervals, func(i string) bool { return i != "15s" }) {
			t.Errorf("%s %s: intervals %v, want 15s each", o.GetKind(), o.GetName(), intervals)
		}
	}

	e := controlPlane(t)
	ctx := context.Background()
	for _, ns := range []string{"monitoring", "grafana"} {
		if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		if err := e.Client.Create(ctx, o.DeepCopy(), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Errorf("API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	remove(t, e.Client, objs)
}
