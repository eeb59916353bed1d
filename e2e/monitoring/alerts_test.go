package monitoring

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// firing is one alert that fired at some point of a phase.
type firing struct {
	alert, phase string
	labels       labels.Labels
	annotations  labels.Labels
}

// checkAlerts evaluates every rule of the PrometheusRule over the whole timeline, as
// Prometheus would every scrapeInterval, and checks that each phase fires exactly the
// alerts it names (nothing while the cluster is healthy), that every alert fires in
// some phase and not in others, and that the alerts name what is in trouble: the
// exhausted pool and not the healthy, disabled or empty ones, the node without ipamd.
func checkAlerts(t *testing.T, st *teststorage.TestStorage, overlay []*unstructured.Unstructured) {
	rule := only(t, overlay, "PrometheusRule")
	groups, found, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if err != nil || !found {
		t.Fatalf("PrometheusRule %s has no spec.groups: %v", rule.GetName(), err)
	}
	// spec.groups is a Prometheus rule file's groups.
	file, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	path := writeTemp(t, "nicpool.rules.yaml", file)

	ctx := context.Background()
	mgr := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(newEngine(), st),
		AppendableV2: st,
		Context:      ctx,
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       promqlParser,
	})
	loaded, errs := mgr.LoadGroups(scrapeInterval, labels.EmptyLabels(), "", nil, false, path)
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the rules of PrometheusRule %s: %v", rule.GetName(), errs)
	}
	var ordered []*rules.Group
	var alertNames []string
	for _, g := range loaded {
		ordered = append(ordered, g)
		for _, ar := range g.AlertingRules() {
			// As after a restart with state restored: the ALERTS series are written.
			ar.SetRestored(true)
			alertNames = append(alertNames, ar.Name())
		}
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Name() < ordered[j].Name() })
	if len(alertNames) == 0 {
		t.Fatal("the PrometheusRule has no alerting rule")
	}

	var fired []firing
	for at := scrapeInterval; at <= end(); at += scrapeInterval {
		ts := epoch.Add(at)
		for _, g := range ordered {
			g.Eval(ctx, ts)
			for _, r := range g.Rules() {
				if err := r.LastError(); err != nil {
					t.Fatalf("rule %s at %s: %v", r.Name(), at, err)
				}
			}
			for _, ar := range g.AlertingRules() {
				for _, a := range ar.ActiveAlerts() {
					if a.State == rules.StateFiring {
						fired = append(fired, firing{ar.Name(), phaseAt(at), a.Labels, a.Annotations})
					}
				}
			}
		}
	}

	for _, f := range fired {
		if p := phaseNamed(f.phase); !slices.Contains(p.fires, f.alert) {
			t.Errorf("%s fired while the cluster was %s (%s): %s", f.alert, f.phase, p.what, f.labels)
		}
		f.annotations.Range(func(l labels.Label) {
			if strings.Contains(l.Value, "error expanding template") || strings.Contains(l.Value, "<no value>") {
				t.Errorf("%s: annotation %s does not render: %q", f.alert, l.Name, l.Value)
			}
		})
	}
	tested := map[string]bool{}
	for _, p := range timeline {
		for _, name := range p.fires {
			tested[name] = true
			if !slices.Contains(alertNames, name) {
				t.Errorf("phase %s expects %s to fire, which the PrometheusRule does not have", p.name, name)
				continue
			}
			if !slices.ContainsFunc(fired, func(f firing) bool { return f.alert == name && f.phase == p.name }) {
				t.Errorf("%s never fired while the cluster was %s (%s)", name, p.name, p.what)
			}
		}
	}
	for _, name := range alertNames {
		if !tested[name] {
			t.Errorf("%s is expected to fire in no phase of the timeline: add the phase that makes it fire", name)
		}
	}
	// The pool gauges' alerts name the pool in trouble, and never the healthy one,
	// the disabled full one or the one with no address.
	for _, name := range []string{"NicpoolPoolExhausted", "NicpoolPoolLowOnAddresses"} {
		pools := map[string]bool{}
		for _, f := range fired {
			if f.alert == name {
				pools[f.labels.Get("pool")] = true
			}
		}
		if !pools[tinyPool] || len(pools) != 1 {
			t.Errorf("%s fired for pools %v, want only %s", name, keys(pools), tinyPool)
		}
	}
	for _, f := range fired {
		if f.alert == "NicpoolIpamdMissing" && f.labels.Get("node") != node {
			t.Errorf("NicpoolIpamdMissing names node %q, want %s", f.labels.Get("node"), node)
		}
		if f.alert == "NicpoolWebhookCertificateExpiring" && f.labels.Get("namespace") != configs.DefaultNamespace {
			t.Errorf("NicpoolWebhookCertificateExpiring names namespace %q, want %s", f.labels.Get("namespace"), configs.DefaultNamespace)
		}
	}
	seen := map[string]bool{}
	for _, f := range fired {
		line := fmt.Sprintf("%s fired while %s: %s", f.alert, f.phase, f.labels)
		if !seen[line] {
			seen[line] = true
			t.Log(line)
		}
	}
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}
