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
)

// firing is one alert that fired at some point of a phase.
type firing struct {
	alert, phase string
	labels       labels.Labels
	annotations  labels.Labels
}

// checkAlerts evaluates every rule of the PrometheusRule over the whole timeline, as
// Prometheus would every scrapeInterval, and checks that nothing fires while the
// cluster is healthy and that every alert fires once it is troubled, for the pool in
// trouble and not for the healthy one.
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
		if f.phase != "troubled" {
			t.Errorf("%s fired while the cluster was %s: %s", f.alert, f.phase, f.labels)
		}
		f.annotations.Range(func(l labels.Label) {
			if strings.Contains(l.Value, "error expanding template") || strings.Contains(l.Value, "<no value>") {
				t.Errorf("%s: annotation %s does not render: %q", f.alert, l.Name, l.Value)
			}
		})
	}
	for _, name := range alertNames {
		if !slices.ContainsFunc(fired, func(f firing) bool { return f.alert == name && f.phase == "troubled" }) {
			t.Errorf("%s never fired on the troubled cluster (exhausted pool, failing ADDs, a released terminating pod, %d denied pods)", name, deniedPods)
		}
	}
	// The pool gauges' alerts name the pool in trouble, and never the healthy one.
	for _, name := range []string{"NicpoolPoolExhausted", "NicpoolPoolLowOnAddresses"} {
		pools := map[string]bool{}
		for _, f := range fired {
			if f.alert == name {
				pools[f.labels.Get("pool")] = true
			}
		}
		if !pools[tinyPool] || pools[healthyPool] || len(pools) != 1 {
			t.Errorf("%s fired for pools %v, want only %s", name, keys(pools), tinyPool)
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
