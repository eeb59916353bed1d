package manifests

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
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
			if o.GetKind() == "CustomResourceDefinition" {
				if i == 0 {
					crds = append(crds, o)
				}
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
		out[filepath.Join("templates", m.mode+".yaml")] = append([]byte(fmt.Sprintf(header, Dir+"/"+m.dir)), body.Bytes()...)
	}
	for _, c := range crds {
		y, err := yaml.Marshal(c.Object)
		if err != nil {
			return nil, err
		}
		out[filepath.Join("crds", c.GetName()+".yaml")] = append([]byte(fmt.Sprintf(header, Dir+"/base/crds")), y...)
	}
	mon, err := Render(filepath.Join(root, Dir, Monitoring))
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	body.WriteString("{{- if .Values.monitoring.enabled }}\n")
	for _, o := range mon {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		// The alerts' own {{ $labels }} templates are Prometheus's, not Helm's.
		body.WriteString("---\n")
		body.Write(escapeTemplates(y))
	}
	body.WriteString("{{- end }}\n")
	out[filepath.Join("templates", "monitoring.yaml")] = append([]byte(fmt.Sprintf(header, Dir+"/"+Monitoring)), body.Bytes()...)

	v, err := values.yaml()
	if err != nil {
		return nil, err
	}
	out["values.yaml"] = v
	out["Chart.yaml"] = []byte(fmt.Sprintf(header, Dir) + chartYAML)
	out[filepath.Join("templates", "validate.yaml")] = []byte(fmt.Sprintf(header, Dir) + validateTemplate)
	return out, nil
}

const chartYAML = `apiVersion: v2
name: nicpool
description: IP address management for Kubernetes pods with several network interfaces, speaking spiderpool's API.
type: application
version: 0.1.0
appVersion: dev
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
	images  map[string]any
	webhook map[string]any
	ipamd   map[string]any
}

func (v *chartValues) yaml() ([]byte, error) {
	doc := []struct {
		comment string
		key     string
		value   any
	}{
		{"Where the webhook's serving certificate comes from: cert-manager (needs cert-manager\n# in the cluster) or self-managed (the webhook generates and rotates its own).", "certificates", map[string]any{"mode": "cert-manager"}},
		{"Images of nicpool's binaries. No image is published yet: build them with `make images`.", "images", v.images},
		{"nicpool-webhook: admission, garbage collection, pool counts and capacity metrics.\n# GOMEMLIMIT in the container follows the default memory limit; keep them together.", "webhook", v.webhook},
		{"nicpool-ipamd, one per node.", "ipamd", v.ipamd},
		{"Prometheus Operator targets, alerting rules and the Grafana dashboard\n# (needs the monitoring.coreos.com/v1 CRDs).", "monitoring", map[string]any{"enabled": false}},
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, header, Dir)
	for i, d := range doc {
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

// A token stands for a template expression in the marshalled YAML; expand replaces it.
type token struct {
	// expr is the expression of a scalar; block, when set, the value path of a
	// mapping or list rendered with toYaml, omitted when empty; item an optional
	// list item.
	expr, block, item string
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
	switch {
	case o.GetKind() == "Deployment" && o.GetName() == "nicpool-webhook":
		if values.webhook == nil {
			values.webhook = map[string]any{}
		}
		w := values.webhook
		spec := o.Object["spec"].(map[string]any)
		w["replicas"] = spec["replicas"]
		spec["replicas"] = put(token{expr: "{{ .Values.webhook.replicas }}"})
		pod := spec["template"].(map[string]any)["spec"].(map[string]any)
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
		w["gc"] = gc
		w["logLevel"] = ""
		c["args"] = append(args, put(token{item: ".Values.webhook.logLevel", expr: "--zap-log-level={{ . }}"}))
	case o.GetKind() == "DaemonSet" && o.GetName() == "nicpool-ipamd":
		if values.ipamd == nil {
			values.ipamd = map[string]any{}
		}
		d := values.ipamd
		pod := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
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
		d["logLevel"] = ""
		c["args"] = append(c["args"].([]any), put(token{item: ".Values.ipamd.logLevel", expr: "--zap-log-level={{ . }}"}))
		ic, err := container(pod, "initContainers", "install-cni")
		if err != nil {
			return nil, err
		}
		if err := imageValue(ic, "plugin", values, put); err != nil {
			return nil, err
		}
		d["installCNIResources"] = ic["resources"]
		ic["resources"] = put(token{block: ".Values.ipamd.installCNIResources"})
	}
	y, err := yaml.Marshal(o.Object)
	if err != nil {
		return nil, err
	}
	return expand(escapeTemplates(y), tokens)
}

// podValues makes a pod's nodeSelector and tolerations values of component.
func podValues(pod map[string]any, component string, v map[string]any, put func(token) string) error {
	for _, k := range []string{"nodeSelector", "tolerations"} {
		d, ok := pod[k]
		if !ok {
			if k == "nodeSelector" {
				d = map[string]any{}
			} else {
				d = []any{}
			}
		}
		v[k] = d
		pod[k] = put(token{block: ".Values." + component + "." + k})
	}
	return nil
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

// imageValue makes a container's image the values images.<key>.repository and .tag.
func imageValue(c map[string]any, key string, values *chartValues, put func(token) string) error {
	image, _ := c["image"].(string)
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return fmt.Errorf("image %q has no tag", image)
	}
	if values.images == nil {
		values.images = map[string]any{}
	}
	values.images[key] = map[string]any{"repository": image[:i], "tag": image[i+1:]}
	c["image"] = put(token{expr: fmt.Sprintf("{{ printf \"%%s:%%s\" .Values.images.%s.repository .Values.images.%s.tag | quote }}", key, key)})
	return nil
}

var tokenLine = regexp.MustCompile(`^( *)(- )?([A-Za-z]+: )?(NICPOOLCHARTTOKEN[0-9]+X)$`)

// expand replaces each token of the marshalled YAML by its template text.
func expand(y []byte, tokens map[string]token) ([]byte, error) {
	var out bytes.Buffer
	seen := 0
	for _, line := range strings.SplitAfter(string(y), "\n") {
		body := strings.TrimSuffix(line, "\n")
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
