package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// ChartDir is the Helm chart, relative to the repository root.
const ChartDir = "charts/nicpool"

// Chart modes: the certificate source, as the chart's certificates.mode names it,
// and the kustomization each mode is rendered from.
var chartModes = []struct{ mode, dir string }{
	{"cert-manager", "overlays/cert-manager"},
	{"self-managed", "overlays/self-managed"},
}

// Chart returns the files of the Helm chart, keyed by their path relative to
// ChartDir. The chart has no objects of its own: it is the kustomizations of this
// folder rendered (root is the repository root), with the fields its values set
// replaced by template expressions whose defaults are the manifests' own values. So
// `helm template` with default values and kustomize give the same objects, and a
// change to the manifests reaches the chart through `make manifests`.
func Chart(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	values := chartValues{}
	var crds []*unstructured.Unstructured
	for i, m := range chartModes {
		objs, err := Render(filepath.Join(root, Dir, m.dir))
		if err != nil {
			return nil, err
		}
		var body bytes.Buffer
		fmt.Fprintf(&body, "{{- if eq .Values.certificates.mode %q }}\n", m.mode)
		for _, o := range objs {
			switch o.GetKind() {
			case "CustomResourceDefinition":
				if i == 0 {
					crds = append(crds, o)
				}
				continue
			case "Namespace":
				// The release's namespace is Helm's (helm install -n NS
				// --create-namespace): a Namespace of the chart's own would be
				// owned by the release and conflict with it.
				continue
			}
			y, err := templated(o, &values)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", m.dir, o.GetKind(), o.GetName(), err)
			}
			body.WriteString("---\n")
			body.Write(y)
		}
		body.WriteString("{{- end }}\n")
		out[filepath.Join("templates", m.mode+".yaml")] = append([]byte(fmt.Sprintf(header, Dir+"/"+m.dir)), releaseNamespace(body.Bytes())...)
	}
	// The CRDs are templates of a sub-chart, not files of crds/: Helm installs
	// crds/ once and never upgrades it, while templates are applied on every
	// upgrade. helm.sh/resource-policy keep leaves them (and every pool and
	// address record) in place when the release is uninstalled.
	for _, c := range crds {
		c = c.DeepCopy()
		ann := c.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["helm.sh/resource-policy"] = "keep"
		c.SetAnnotations(ann)
		y, err := templated(c, &values)
		if err != nil {
			return nil, err
		}
		out[filepath.Join(CRDChartDir, "templates", c.GetName()+".yaml")] = append([]byte(fmt.Sprintf(header, Dir+"/base/crds")), y...)
	}
	out[filepath.Join(CRDChartDir, "Chart.yaml")] = []byte(fmt.Sprintf(header, Dir) + fmt.Sprintf(crdChartYAML, ChartVersion, AppVersion))
	out[filepath.Join(CRDChartDir, "values.yaml")] = []byte(fmt.Sprintf(header, Dir) + "{}\n")
	mon, err := Render(filepath.Join(root, Dir, Monitoring))
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	values.monitoring = map[string]any{"enabled": false}
	body.WriteString("{{- if .Values.monitoring.enabled }}\n")
	for _, o := range mon {
		// The alerts' own {{ $labels }} templates are Prometheus's, not Helm's
		// (templated escapes them).
		y, err := templated(o, &values)
		if err != nil {
			return nil, fmt.Errorf("%s: %s %s: %w", Monitoring, o.GetKind(), o.GetName(), err)
		}
		body.WriteString("---\n")
		body.Write(y)
	}
	body.WriteString("{{- end }}\n")
	out[filepath.Join("templates", "monitoring.yaml")] = append([]byte(fmt.Sprintf(header, Dir+"/"+Monitoring)), releaseNamespace(body.Bytes())...)

	v, err := values.yaml()
	if err != nil {
		return nil, err
	}
	out["values.yaml"] = v
	schema, err := values.schema()
	if err != nil {
		return nil, err
	}
	out["values.schema.json"] = schema
	out["Chart.yaml"] = []byte(fmt.Sprintf(header, Dir) + fmt.Sprintf(chartYAML, KubeVersion, ChartVersion, AppVersion, ChartVersion))
	out[filepath.Join("templates", "validate.yaml")] = []byte(fmt.Sprintf(header, Dir) + validateTemplate)
	out[filepath.Join("templates", "_helpers.tpl")] = []byte(fmt.Sprintf(header, Dir) + helpersTemplate)
	out[filepath.Join("templates", "NOTES.txt")] = []byte(notesTemplate)
	return out, nil
}

// The chart's versions. AppVersion is the version of nicpool the chart and the
// manifests install (their default image tag: manifests/base/kustomization.yaml says
// the same, which Chart checks); `make release VERSION=vX.Y.Z` sets both in the
// chart it packages.
const (
	ChartVersion = "0.1.0"
	AppVersion   = "v0.1.0"
	// KubeVersion is the oldest Kubernetes nicpool runs on: ipamd and the garbage
	// collector list IPBlocks by a CRD field selector (selectableFields), which is
	// on by default from 1.31 (CustomResourceFieldSelectors).
	KubeVersion = ">=1.31.0-0"
)

// CRDChartDir is the sub-chart holding the CRDs, relative to ChartDir.
const CRDChartDir = "charts/crds"

const chartYAML = `apiVersion: v2
name: nicpool
description: IP address management for Kubernetes pods with several network interfaces, speaking spiderpool's API.
type: application
kubeVersion: "%s"
version: %s
appVersion: %s
home: https://github.com/nicpool/nicpool
sources:
  - https://github.com/nicpool/nicpool
annotations:
  # Artifact Hub reads the licence here; Helm's Chart.yaml has no field of its own.
  artifacthub.io/license: Apache-2.0
dependencies:
  # The CRDs, applied on install and on every upgrade (crds.enabled=false leaves
  # them to you).
  - name: nicpool-crds
    version: %s
    condition: crds.enabled
`

const crdChartYAML = `apiVersion: v2
name: nicpool-crds
description: The CRDs of nicpool (spiderpool's SpiderIPPool, SpiderEndpoint, SpiderReservedIP and nicpool's IPBlock), kept when the release is uninstalled.
type: application
version: %s
appVersion: %s
`

// namespaceWord is the manifests' namespace as a whole word: kustomize's
// `namespace:` and everything generated from configs.Options.Namespace (the
// admission policies' service-account names, the webhook configurations' excluded
// namespaces, the certificate's DNS names) name it.
var namespaceWord = regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(configs.DefaultNamespace) + `([^a-z0-9-]|$)`)

// releaseNamespace makes every mention of the manifests' namespace the release's.
func releaseNamespace(y []byte) []byte {
	lines := bytes.SplitAfter(y, []byte("\n"))
	for i, l := range lines {
		for namespaceWord.Match(l) {
			l = namespaceWord.ReplaceAll(l, []byte("${1}{{ .Release.Namespace }}${2}"))
		}
		lines[i] = l
	}
	return bytes.Join(lines, nil)
}

const helpersTemplate = `{{/*
nicpool.image: an image reference from .Values.images: registry/repository, the
image's tag (default images.tag, default the chart's appVersion), and @digest when
one is set. The tag stays beside a digest: kubectl nicpool version reads it.
*/}}
{{- define "nicpool.image" -}}
{{- $images := .root.Values.images -}}
{{- $img := index $images .image -}}
{{- $ref := $img.repository -}}
{{- with $images.registry }}{{ $ref = printf "%s/%s" . $img.repository }}{{ end -}}
{{- $ref = printf "%s:%s" $ref ($img.tag | default $images.tag | default .root.Chart.AppVersion) -}}
{{- with $img.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end }}
`

const notesTemplate = `nicpool {{ .Chart.AppVersion }} is installed in the namespace {{ .Release.Namespace }}
(certificates: {{ .Values.certificates.mode }}).

It is ready when the webhook's Deployment is available and ipamd runs on every node:

  kubectl -n {{ .Release.Namespace }} rollout status deployment/nicpool-webhook
  kubectl -n {{ .Release.Namespace }} rollout status daemonset/nicpool-ipamd

The namespace admits privileged pods only if its PodSecurity level allows them (ipamd
needs the host network and host paths); where the cluster enforces a stricter
default, label it:

  kubectl label namespace {{ .Release.Namespace }} pod-security.kubernetes.io/enforce=privileged

Then create SpiderIPPools and NetworkAttachmentDefinitions whose CNI configuration
says "ipam": {"type": "nicpool"}. Versions running in the cluster:

  kubectl nicpool version

Upgrades, rollback and version skew: https://github.com/nicpool/nicpool/blob/main/docs/install.md
`

// validateTemplate refuses values the chart cannot render into a working install.
const validateTemplate = `{{- if not (has .Values.certificates.mode (list "cert-manager" "self-managed")) }}
{{- fail (printf "certificates.mode is %q: set cert-manager (cert-manager issues the webhook's certificate) or self-managed (the webhook manages its own)" .Values.certificates.mode) }}
{{- end }}
`

// escapeTemplates makes Go-template text that belongs to the object (Prometheus
// alert annotations) pass through Helm unchanged.
func escapeTemplates(y []byte) []byte {
	re := regexp.MustCompile(`\{\{[^}]*\}\}`)
	return re.ReplaceAllFunc(y, func(m []byte) []byte {
		return []byte(fmt.Sprintf("{{ %q }}", string(m)))
	})
}

// chartValues are the chart's values with the manifests' defaults, filled in while
// the objects are templated.
type chartValues struct {
	images     map[string]any
	webhook    map[string]any
	ipamd      map[string]any
	ipam       map[string]any
	monitoring map[string]any
	cniBinDir  string
}

// valuesDoc is the chart's values in the order values.yaml lists them, each with its
// comment. A new value is a key here (or under a component's map, filled in by
// templated) and the template expression that uses it.
func (v *chartValues) doc() []struct {
	comment string
	key     string
	value   any
} {
	return []struct {
		comment string
		key     string
		value   any
	}{
		{"Where the webhook's serving certificate comes from: cert-manager (needs cert-manager\n# in the cluster) or self-managed (the webhook generates and rotates its own).", "certificates", map[string]any{"mode": "cert-manager"}},
		{"Images of nicpool's binaries: registry/repository:tag[@digest] each. tag defaults\n# to images.tag, which defaults to the chart's appVersion; a digest pins the image\n# (the tag stays beside it). pullPolicy and pullSecrets apply to every image.", "images", v.images},
		{"The nodes' CNI bin directory, where ipamd's init container installs the CNI plugin\n# (OpenShift: /var/lib/cni/bin; k3s: /var/lib/rancher/k3s/data/current/bin).", "cniBinDir", v.cniBinDir},
		{"The CRDs, a sub-chart applied on install and on every upgrade, kept when the\n# release is uninstalled. false leaves installing and upgrading them to you.", "crds", map[string]any{"enabled": true}},
		{"nicpool-webhook: admission, garbage collection, pool counts and capacity metrics.\n# It runs on the host network: ports are taken on every node it runs on. GOMEMLIMIT\n# follows resources.limits.memory (95% of it). podDisruptionBudget.enabled=false\n# for webhook.replicas=1, where the budget would block every drain. extraArgs are\n# more flags, extraEnv more environment variables (EnvVar objects).", "webhook", v.webhook},
		{"nicpool-ipamd, one per node (host network; GOMEMLIMIT follows the memory limit).", "ipamd", v.ipamd},
		{"spiderpool-conf's IPAM switches, under the names spiderpool's chart gives them;\n# the webhook and every ipamd get the same. enableIPv4/enableIPv6: false leaves out\n# the pools of that family and refuses its SpiderIPPools and SpiderReservedIPs;\n# enableStatefulSet: false serves StatefulSet pods like any other (their addresses\n# are released when they go).", ipamconf.ChartSection, v.ipam},
		{"Prometheus Operator targets, alerting rules and the Grafana dashboard\n# (needs the monitoring.coreos.com/v1 CRDs). Each object takes more labels (a\n# Prometheus selecting on release: <its release> loads only objects labelled so)\n# and a namespace (empty: the release's; the monitors select nicpool's pods in the\n# release's namespace from wherever they are); interval is how often a monitor\n# scrapes, or the rules are evaluated. The dashboard's labels are what Grafana's\n# sidecar looks for (its default: grafana_dashboard: \"1\"), its annotations say\n# where it goes (the sidecar's folder annotation).", "monitoring", v.monitoring},
	}
}

func (v *chartValues) yaml() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, header, Dir)
	for i, d := range v.doc() {
		y, err := yaml.Marshal(map[string]any{d.key: d.value})
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# %s\n", d.comment)
		b.Write(y)
	}
	return b.Bytes(), nil
}

// freeForm are the values whose keys are the user's (Kubernetes objects and maps
// passed through as they are); every other mapping of the values is closed, so that
// a misspelt key (webhook.replica) is refused instead of ignored.
var freeForm = map[string]bool{
	"resources": true, "installCNIResources": true, "nodeSelector": true, "affinity": true,
	"labels": true, "annotations": true,
}

// schema is values.schema.json: every value's type, generated from the defaults.
func (v *chartValues) schema() ([]byte, error) {
	props := map[string]any{
		// Helm adds global, and the values of each sub-chart under its name, to
		// the values of a chart with sub-charts.
		"global":       map[string]any{"type": "object"},
		"nicpool-crds": map[string]any{"type": "object"},
	}
	for _, d := range v.doc() {
		props[d.key] = schemaOf(d.key, d.value)
	}
	props["certificates"].(map[string]any)["properties"].(map[string]any)["mode"] = map[string]any{"type": "string", "enum": []string{"cert-manager", "self-managed"}}
	for _, img := range []string{"webhook", "ipamd", "plugin"} {
		p := props["images"].(map[string]any)["properties"].(map[string]any)[img].(map[string]any)["properties"].(map[string]any)
		p["digest"] = map[string]any{"type": "string", "pattern": "^(sha256:[0-9a-f]{64})?$"}
	}
	root := map[string]any{
		"$schema":              "https://json-schema.org/draft-07/schema#",
		"title":                "Values of the nicpool chart (generated by `make manifests` from manifests/chart.go)",
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	j, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(j, '\n'), nil
}

func schemaOf(key string, v any) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		if freeForm[key] || len(v) == 0 {
			return map[string]any{"type": "object"}
		}
		props := map[string]any{}
		for k, e := range v {
			props[k] = schemaOf(k, e)
		}
		return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	case []any, []string:
		if key == "extraArgs" {
			return map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
		}
		return map[string]any{"type": "array"}
	case string:
		return map[string]any{"type": "string"}
	case bool:
		return map[string]any{"type": "boolean"}
	case int, int32, int64, float64:
		return map[string]any{"type": "integer", "minimum": 0}
	case nil:
		return map[string]any{}
	}
	return map[string]any{}
}

// A token stands for a template expression in the marshalled YAML; expand replaces it.
type token struct {
	// expr is the expression of a scalar; block, when set, the value path of a
	// mapping or list rendered with toYaml, omitted when empty; item an optional
	// list item; items the value path of a list whose items are appended to the
	// list the token stands in.
	expr, block, item, items string
	// entries, the value path of a mapping whose entries are added to the mapping
	// the token is a key of (its value is "").
	entries string
	// cond wraps the whole object in {{- if cond }} (one per object).
	cond string
}

// templated marshals an object with its value fields replaced by template
// expressions, recording their defaults in values.
func templated(o *unstructured.Unstructured, values *chartValues) ([]byte, error) {
	o = o.DeepCopy()
	tokens := map[string]token{}
	put := func(t token) string {
		name := fmt.Sprintf("NICPOOLCHARTTOKEN%dX", len(tokens))
		tokens[name] = t
		return name
	}
	standardLabels(o.Object, put)
	var cond string
	switch {
	case o.GetKind() == "Deployment" && o.GetName() == "nicpool-webhook":
		if values.webhook == nil {
			values.webhook = map[string]any{}
		}
		w := values.webhook
		spec := o.Object["spec"].(map[string]any)
		w["replicas"] = spec["replicas"]
		spec["replicas"] = put(token{expr: "{{ .Values.webhook.replicas }}"})
		tmpl := spec["template"].(map[string]any)
		standardLabels(tmpl, put)
		pod := tmpl["spec"].(map[string]any)
		if err := podValues(pod, "webhook", w, put); err != nil {
			return nil, err
		}
		c, err := container(pod, "containers", "webhook")
		if err != nil {
			return nil, err
		}
		if err := imageValue(c, "webhook", values, put); err != nil {
			return nil, err
		}
		w["resources"] = c["resources"]
		c["resources"] = put(token{block: ".Values.webhook.resources"})
		gc := map[string]any{}
		args := c["args"].([]any)
		for i, a := range args {
			for _, f := range []struct{ flag, key string }{{"--gc-interval=", "interval"}, {"--gc-min-age=", "minAge"}, {"--gc-terminating-grace=", "terminatingGrace"}} {
				if s, ok := a.(string); ok && strings.HasPrefix(s, f.flag) {
					gc[f.key] = strings.TrimPrefix(s, f.flag)
					args[i] = put(token{expr: fmt.Sprintf("{{ printf \"%s%%s\" .Values.webhook.gc.%s | quote }}", f.flag, f.key)})
				}
			}
		}
		if len(gc) != 3 {
			return nil, fmt.Errorf("the webhook's args set %d of the 3 garbage-collection flags", len(gc))
		}
		const refuse = "--refuse-pool-delete-while-allocated="
		refused := false
		for i, a := range args {
			if s, ok := a.(string); ok && strings.HasPrefix(s, refuse) {
				w["refusePoolDeleteWhileAllocated"] = strings.TrimPrefix(s, refuse) == "true"
				args[i] = put(token{expr: fmt.Sprintf("{{ printf \"%s%%t\" .Values.webhook.refusePoolDeleteWhileAllocated | quote }}", refuse)})
				refused = true
			}
		}
		if !refused {
			return nil, fmt.Errorf("the webhook's args do not set %s", refuse)
		}
		if err := switchValues("webhook", args, values, put); err != nil {
			return nil, err
		}
		w["gc"] = gc
		if err := portValues(c, "webhook", w, put, map[string]string{"webhook": "--webhook-port=", "metrics": "--metrics-bind-address=:", "health": "--health-probe-bind-address=:"}); err != nil {
			return nil, err
		}
		w["logLevel"] = ""
		c["args"] = append(c["args"].([]any), put(token{item: ".Values.webhook.logLevel", expr: "--zap-log-level={{ . }}"}))
		w["logEncoder"] = ""
		c["args"] = append(c["args"].([]any), put(token{item: ".Values.webhook.logEncoder", expr: "--zap-encoder={{ . }}"}))
		w["logTimeEncoding"] = ""
		c["args"] = append(c["args"].([]any), put(token{item: ".Values.webhook.logTimeEncoding", expr: "--zap-time-encoding={{ . }}"}))
		extraValues(c, "webhook", w, put)
	case o.GetKind() == "PodDisruptionBudget" && o.GetName() == "nicpool-webhook":
		if values.webhook == nil {
			values.webhook = map[string]any{}
		}
		spec := o.Object["spec"].(map[string]any)
		values.webhook["podDisruptionBudget"] = map[string]any{"enabled": true, "minAvailable": spec["minAvailable"]}
		spec["minAvailable"] = put(token{expr: "{{ .Values.webhook.podDisruptionBudget.minAvailable }}"})
		cond = ".Values.webhook.podDisruptionBudget.enabled"
	case o.GetKind() == "DaemonSet" && o.GetName() == "nicpool-ipamd":
		if values.ipamd == nil {
			values.ipamd = map[string]any{}
		}
		d := values.ipamd
		tmpl := o.Object["spec"].(map[string]any)["template"].(map[string]any)
		standardLabels(tmpl, put)
		pod := tmpl["spec"].(map[string]any)
		if err := podValues(pod, "ipamd", d, put); err != nil {
			return nil, err
		}
		c, err := container(pod, "containers", "ipamd")
		if err != nil {
			return nil, err
		}
		if err := imageValue(c, "ipamd", values, put); err != nil {
			return nil, err
		}
		d["resources"] = c["resources"]
		c["resources"] = put(token{block: ".Values.ipamd.resources"})
		if err := switchValues("ipamd", c["args"].([]any), values, put); err != nil {
			return nil, err
		}
		if err := portValues(c, "ipamd", d, put, map[string]string{"metrics": "--metrics-bind-address=:", "health": "--health-probe-bind-address=:"}); err != nil {
			return nil, err
		}
		d["logLevel"] = ""
		c["args"] = append(c["args"].([]any), put(token{item: ".Values.ipamd.logLevel", expr: "--zap-log-level={{ . }}"}))
		d["logEncoder"] = ""
		c["args"] = append(c["args"].([]any), put(token{item: ".Values.ipamd.logEncoder", expr: "--zap-encoder={{ . }}"}))
		d["logTimeEncoding"] = ""
		c["args"] = append(c["args"].([]any), put(token{item: ".Values.ipamd.logTimeEncoding", expr: "--zap-time-encoding={{ . }}"}))
		extraValues(c, "ipamd", d, put)
		ic, err := container(pod, "initContainers", "install-cni")
		if err != nil {
			return nil, err
		}
		if err := imageValue(ic, "plugin", values, put); err != nil {
			return nil, err
		}
		d["installCNIResources"] = ic["resources"]
		ic["resources"] = put(token{block: ".Values.ipamd.installCNIResources"})
		vols, _ := pod["volumes"].([]any)
		found := false
		for _, v := range vols {
			v, _ := v.(map[string]any)
			if hp, ok := v["hostPath"].(map[string]any); ok && v["name"] == "cni-bin" {
				values.cniBinDir, _ = hp["path"].(string)
				hp["path"] = put(token{expr: "{{ .Values.cniBinDir | quote }}"})
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("ipamd has no hostPath volume cni-bin")
		}
	}
	if err := monitoringValues(o, values, put); err != nil {
		return nil, err
	}
	y, err := yaml.Marshal(o.Object)
	if err != nil {
		return nil, err
	}
	y, err = expand(escapeTemplates(y), tokens)
	if err != nil || cond == "" {
		return y, err
	}
	return []byte(fmt.Sprintf("{{- if %s }}\n%s{{- end }}\n", cond, y)), nil
}

// switchValues templates a container's ipamconf flags (--enable-ipv4=, --enable-ipv6=,
// --enable-stateful-set=) as the ipam values, which the webhook and ipamd share: the
// manifests must set each, and set them alike in both. The flags and the values are
// ipamconf.Settings'.
func switchValues(component string, args []any, values *chartValues, put func(token) string) error {
	first := values.ipam == nil
	if first {
		values.ipam = map[string]any{}
	}
	for _, st := range ipamconf.Settings {
		flag := "--" + st.Flag + "="
		found := false
		for i, a := range args {
			s, ok := a.(string)
			if !ok || !strings.HasPrefix(s, flag) {
				continue
			}
			v := strings.TrimPrefix(s, flag) == "true"
			if prev, ok := values.ipam[st.Key]; ok && prev != v {
				return fmt.Errorf("%s's %s%t differs from the other component's: the webhook and ipamd must agree", component, flag, v)
			}
			values.ipam[st.Key] = v
			args[i] = put(token{expr: fmt.Sprintf("{{ printf \"%s%%t\" .Values.%s | quote }}", flag, st.ChartValue())})
			found = true
		}
		if !found {
			return fmt.Errorf("%s's args do not set %s", component, flag)
		}
	}
	return nil
}

// monitoringObjects are the monitoring overlay's objects and the key of their values
// under monitoring.
var monitoringObjects = map[string]string{
	"ServiceMonitor/nicpool-webhook": "serviceMonitor",
	"PodMonitor/nicpool-ipamd":       "podMonitor",
	"PrometheusRule/nicpool":         "prometheusRule",
	"ConfigMap/nicpool-dashboard":    "dashboard",
}

// monitoringValues makes a monitoring object's namespace, extra labels and scrape or
// evaluation interval values of monitoring.<key>; the dashboard's labels Grafana's
// sidecar selects on (the manifests' grafana_dashboard label) and its annotations.
func monitoringValues(o *unstructured.Unstructured, values *chartValues, put func(token) string) error {
	k, ok := monitoringObjects[o.GetKind()+"/"+o.GetName()]
	if !ok {
		return nil
	}
	path := ".Values.monitoring." + k
	v := map[string]any{"namespace": ""}
	values.monitoring[k] = v
	meta := o.Object["metadata"].(map[string]any)
	meta["namespace"] = put(token{expr: fmt.Sprintf("{{ %s.namespace | default .Release.Namespace | quote }}", path)})
	labels := meta["labels"].(map[string]any)
	if k == "dashboard" {
		sidecar := map[string]any{}
		for name, val := range labels {
			if strings.HasPrefix(name, "grafana_") {
				sidecar[name] = val
				delete(labels, name)
			}
		}
		if len(sidecar) == 0 {
			return fmt.Errorf("the dashboard ConfigMap has no grafana_ label for Grafana's sidecar")
		}
		v["labels"] = sidecar
		v["annotations"] = map[string]any{}
		meta["annotations"] = put(token{block: path + ".annotations"})
	} else {
		v["labels"] = map[string]any{}
	}
	labels[put(token{entries: path + ".labels"})] = ""
	spec, _ := o.Object["spec"].(map[string]any)
	switch o.GetKind() {
	case "ServiceMonitor", "PodMonitor":
		field := map[string]string{"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints"}[o.GetKind()]
		eps, _ := spec[field].([]any)
		for _, ep := range eps {
			ep := ep.(map[string]any)
			if v["interval"] != nil && v["interval"] != ep["interval"] {
				return fmt.Errorf("%s %s: endpoints scrape at different intervals", o.GetKind(), o.GetName())
			}
			v["interval"] = ep["interval"]
			ep["interval"] = put(token{expr: fmt.Sprintf("{{ %s.interval | quote }}", path)})
		}
		if v["interval"] == nil {
			return fmt.Errorf("%s %s: no endpoint with an interval", o.GetKind(), o.GetName())
		}
	case "PrometheusRule":
		groups, _ := spec["groups"].([]any)
		for _, g := range groups {
			g := g.(map[string]any)
			if g["interval"] == nil || (v["interval"] != nil && v["interval"] != g["interval"]) {
				return fmt.Errorf("rule group %v: every group is evaluated at one interval, set on each", g["name"])
			}
			v["interval"] = g["interval"]
			g["interval"] = put(token{expr: fmt.Sprintf("{{ %s.interval | quote }}", path)})
		}
	}
	return nil
}

// helmLabels are the labels Helm's conventions give every object of a release,
// beside the manifests' app.kubernetes.io/name, component and part-of.
var helmLabels = []struct{ name, expr string }{
	{"helm.sh/chart", `{{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}`},
	{"app.kubernetes.io/managed-by", `{{ .Release.Service | quote }}`},
	{"app.kubernetes.io/instance", `{{ .Release.Name | quote }}`},
	{"app.kubernetes.io/version", `{{ .Chart.AppVersion | quote }}`},
}

// HelmLabels are the names of the labels only the chart sets.
func HelmLabels() []string {
	out := make([]string, len(helmLabels))
	for i, l := range helmLabels {
		out[i] = l.name
	}
	return out
}

// standardLabels adds helmLabels to the metadata of obj (an object or a pod
// template).
func standardLabels(obj map[string]any, put func(token) string) {
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	for _, l := range helmLabels {
		labels[l.name] = put(token{expr: l.expr})
	}
}

// podValues makes a pod's nodeSelector, tolerations, affinity, priorityClassName and
// image pull secrets values of component (the pull secrets: images.pullSecrets).
func podValues(pod map[string]any, component string, v map[string]any, put func(token) string) error {
	for _, k := range []string{"nodeSelector", "tolerations", "affinity"} {
		d, ok := pod[k]
		if !ok {
			if k == "tolerations" {
				d = []any{}
			} else {
				d = map[string]any{}
			}
		}
		v[k] = d
		pod[k] = put(token{block: ".Values." + component + "." + k})
	}
	pc, ok := pod["priorityClassName"].(string)
	if !ok {
		return fmt.Errorf("the %s pod has no priorityClassName", component)
	}
	v["priorityClassName"] = pc
	pod["priorityClassName"] = put(token{expr: fmt.Sprintf("{{ .Values.%s.priorityClassName | quote }}", component)})
	pod["imagePullSecrets"] = put(token{block: ".Values.images.pullSecrets"})
	return nil
}

// portValues makes each named port of a container the value <component>.ports.<name>:
// its containerPort and the flag that binds it, which must agree (the Service, the
// probes and the monitors follow the port names).
func portValues(c map[string]any, component string, v map[string]any, put func(token) string, flags map[string]string) error {
	ports := map[string]any{}
	args, _ := c["args"].([]any)
	for _, p := range c["ports"].([]any) {
		p := p.(map[string]any)
		name, _ := p["name"].(string)
		flag, ok := flags[name]
		if !ok {
			return fmt.Errorf("port %q of %s has no flag known to the chart", name, component)
		}
		n := p["containerPort"]
		bound := false
		for i, a := range args {
			if s, ok := a.(string); ok && s == fmt.Sprintf("%s%v", flag, n) {
				args[i] = put(token{expr: fmt.Sprintf("{{ printf \"%s%%v\" .Values.%s.ports.%s | quote }}", flag, component, name)})
				bound = true
			}
		}
		if !bound {
			return fmt.Errorf("%s's port %s (%v) is bound by no %s%v argument", component, name, n, flag, n)
		}
		ports[name] = n
		p["containerPort"] = put(token{expr: fmt.Sprintf("{{ .Values.%s.ports.%s }}", component, name)})
	}
	v["ports"] = ports
	return nil
}

// extraValues appends <component>.extraArgs to a container's args and
// <component>.extraEnv to its environment.
func extraValues(c map[string]any, component string, v map[string]any, put func(token) string) {
	v["extraArgs"] = []any{}
	v["extraEnv"] = []any{}
	c["args"] = append(c["args"].([]any), put(token{items: ".Values." + component + ".extraArgs"}))
	env, _ := c["env"].([]any)
	c["env"] = append(env, put(token{items: ".Values." + component + ".extraEnv"}))
}

func container(pod map[string]any, list, name string) (map[string]any, error) {
	cs, _ := pod[list].([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no %s %q", list, name)
}

// imageValue makes a container's image the values images.registry, images.<key>
// (repository, tag, digest) and its pull policy images.pullPolicy. The manifests'
// image must be <registry>/<repository>:<AppVersion>, the same registry and pull
// policy for every image.
func imageValue(c map[string]any, key string, values *chartValues, put func(token) string) error {
	image, _ := c["image"].(string)
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return fmt.Errorf("image %q has no tag", image)
	}
	if tag := image[i+1:]; tag != AppVersion {
		return fmt.Errorf("image %q: the manifests' tag is not the chart's appVersion %s (manifests/base/kustomization.yaml)", image, AppVersion)
	}
	slash := strings.LastIndex(image[:i], "/")
	if slash < 0 {
		return fmt.Errorf("image %q has no registry", image)
	}
	registry, repository := image[:slash], image[slash+1:i]
	policy, _ := c["imagePullPolicy"].(string)
	if values.images == nil {
		values.images = map[string]any{"registry": registry, "tag": "", "pullPolicy": policy, "pullSecrets": []any{}}
	}
	if values.images["registry"] != registry || values.images["pullPolicy"] != policy {
		return fmt.Errorf("image %q (%s): every image must come from one registry with one pull policy, %v and %v", image, policy, values.images["registry"], values.images["pullPolicy"])
	}
	values.images[key] = map[string]any{"repository": repository, "tag": "", "digest": ""}
	c["image"] = put(token{expr: fmt.Sprintf(`{{ include "nicpool.image" (dict "root" $ "image" %q) | quote }}`, key)})
	c["imagePullPolicy"] = put(token{expr: "{{ .Values.images.pullPolicy }}"})
	return nil
}

var tokenKey = regexp.MustCompile(`^( *)(NICPOOLCHARTTOKEN[0-9]+X): ""$`)

var tokenLine = regexp.MustCompile(`^( *)(- )?([A-Za-z0-9./_-]+: )?(NICPOOLCHARTTOKEN[0-9]+X)$`)

// expand replaces each token of the marshalled YAML by its template text.
func expand(y []byte, tokens map[string]token) ([]byte, error) {
	var out bytes.Buffer
	seen := 0
	for _, line := range strings.SplitAfter(string(y), "\n") {
		body := strings.TrimSuffix(line, "\n")
		if k := tokenKey.FindStringSubmatch(body); k != nil {
			seen++
			t := tokens[k[2]]
			if t.entries == "" {
				return nil, fmt.Errorf("token as a key: %q", body)
			}
			fmt.Fprintf(&out, "%s{{- with %s }}\n%s{{- toYaml . | nindent %d }}\n%s{{- end }}\n", k[1], t.entries, k[1], len(k[1]), k[1])
			continue
		}
		m := tokenLine.FindStringSubmatch(body)
		if m == nil {
			if strings.Contains(body, "NICPOOLCHARTTOKEN") {
				return nil, fmt.Errorf("token in an unexpected place: %q", body)
			}
			out.WriteString(line)
			continue
		}
		seen++
		indent, dash, key, t := m[1], m[2], m[3], tokens[m[4]]
		switch {
		case t.block != "":
			// key: value of a mapping, omitted when the value is empty.
			if dash != "" || key == "" {
				return nil, fmt.Errorf("block token as a list item: %q", body)
			}
			fmt.Fprintf(&out, "%s{{- with %s }}\n%s%s{{- toYaml . | nindent %d }}\n%s{{- end }}\n", indent, t.block, indent, key, len(indent)+2, indent)
		case t.items != "":
			// More items of the list, at its indentation.
			if dash == "" || key != "" {
				return nil, fmt.Errorf("items token outside a list: %q", body)
			}
			fmt.Fprintf(&out, "%s{{- with %s }}\n%s{{- toYaml . | nindent %d }}\n%s{{- end }}\n", indent, t.items, indent, len(indent), indent)
		case t.item != "":
			fmt.Fprintf(&out, "%s{{- with %s }}\n%s%s%s\n%s{{- end }}\n", indent, t.item, indent, dash, t.expr, indent)
		default:
			fmt.Fprintf(&out, "%s%s%s%s\n", indent, dash, key, t.expr)
		}
	}
	if seen != len(tokens) {
		return nil, fmt.Errorf("%d of %d tokens expanded", seen, len(tokens))
	}
	return out.Bytes(), nil
}

// ChartFiles lists the chart's generated paths, sorted.
func ChartFiles(files map[string][]byte) []string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}
