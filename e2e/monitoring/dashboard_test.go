package monitoring

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/teststorage"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// panel is what the test reads of a Grafana panel; rows nest panels.
type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// grafanaVariables are replaced by what Grafana would substitute before a query
// reaches Prometheus: every pool, a rate window of a few scrapes.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "2m",
	"${pool}", ".*",
	"$pool", ".*",
)

// labelValues is Grafana's variable query label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// checkDashboard parses every query of the Grafana dashboard with the PromQL parser
// and runs it against the troubled cluster's samples: each panel shows data.
func checkDashboard(t *testing.T, st *teststorage.TestStorage, overlay []*unstructured.Unstructured) {
	cm := only(t, overlay, "ConfigMap")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if len(data) != 1 {
		t.Fatalf("ConfigMap %s holds %d files, want one dashboard", cm.GetName(), len(data))
	}
	var d dashboard
	for name, raw := range data {
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	engine := newEngine()
	// Near the end of the troubled phase, the last one with every component scraped.
	at := epoch.Add(phaseNamed("troubled").to - 5*scrapeInterval)
	query := func(where, expr string) {
		if _, err := promqlParser.ParseExpr(grafanaVariables.Replace(expr)); err != nil {
			t.Errorf("%s: %q does not parse: %v", where, expr, err)
			return
		}
		q, err := engine.NewInstantQuery(context.Background(), st, nil, grafanaVariables.Replace(expr), at)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			return
		}
		defer q.Close()
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Errorf("%s: %q: %v", where, expr, res.Err)
			return
		}
		if empty(res.Value) {
			t.Errorf("%s: %q returns nothing on metrics of a cluster with pools, pods, failures and denials: a metric or label name is wrong", where, expr)
		}
	}

	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, target := range p.Targets {
				queries++
				query("panel "+p.Title, target.Expr)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Fatal("the dashboard has no query")
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if json.Unmarshal(v.Query, &s) != nil {
				t.Errorf("variable %s: query %s is neither a string nor {query: string}", v.Name, v.Query)
				continue
			}
			q.Query = s
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, q.Query)
			continue
		}
		query("variable "+v.Name, "count by ("+m[2]+") ("+m[1]+")")
	}
}

func empty(v parser.Value) bool {
	switch v := v.(type) {
	case promql.Vector:
		return len(v) == 0
	case promql.Matrix:
		return len(v) == 0
	default:
		return v == nil
	}
}
