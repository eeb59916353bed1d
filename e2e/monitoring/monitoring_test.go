package monitoring

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/teststorage"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
)

// scrapeInterval is the interval of the simulated Prometheus, the monitors' interval.
const scrapeInterval = 30 * time.Second

// phase is a stretch of the simulated timeline during which every scrape returns
// the same samples: those scraped after that part of the scenario (recording[name]).
// fires are the alerts that must fire during the phase; no other alert may.
type phase struct {
	name     string
	from, to time.Duration
	what     string
	fires    []string
}

// The timeline: long enough in each phase for every rule's range and `for:`
// duration to run out, so a rule that should fire has every chance to, and one
// that fired in the phase before has resolved.
var timeline = []phase{
	{"start", 0, 10 * time.Minute, "nothing created yet", nil},
	{"healthy", 10 * time.Minute, 40 * time.Minute, "pods on a roomy pool", nil},
	{"troubled", 40 * time.Minute, 70 * time.Minute,
		fmt.Sprintf("an exhausted pool, failing ADDs, a released terminating pod, %d denied pods; a disabled full pool and a pool of no address", deniedPods),
		[]string{"NicpoolPoolLowOnAddresses", "NicpoolPoolExhausted", "NicpoolAllocationFailures", "NicpoolGCReleasedTerminatingPods", "NicpoolWebhookDenialsSpike"}},
	{"leaderless", 70 * time.Minute, 100 * time.Minute,
		"the elected webhook replica gone, the one left not elected: the pool gauges vanish while the tiny pool is still exhausted",
		[]string{"NicpoolNoCapacityPublisher"}},
	{"webhook-down", 100 * time.Minute, 130 * time.Minute, "the webhook's target failing its scrapes",
		[]string{"NicpoolWebhookDown", "NicpoolNoCapacityPublisher"}},
	{"webhook-unscraped", 130 * time.Minute, 160 * time.Minute, "no webhook target at all",
		[]string{"NicpoolWebhookDown", "NicpoolNoCapacityPublisher"}},
	{"certificate-expiring", 160 * time.Minute, 190 * time.Minute, "a webhook elected again, serving a certificate valid for 10 days; the tiny pool with an address free",
		[]string{"NicpoolWebhookCertificateExpiring"}},
	{"ipamd-unscraped", 190 * time.Minute, 220 * time.Minute, "ipamd running and ready, but no ipamd target scraped (its PodMonitor not selected)",
		[]string{"NicpoolIpamdNotScraped", "NicpoolWebhookCertificateExpiring"}},
	{"ipamd-missing", 220 * time.Minute, 250 * time.Minute, "the node's ipamd stopped while its pods run (its target's scrapes failing)",
		[]string{"NicpoolIpamdMissing", "NicpoolIpamdNotScraped", "NicpoolWebhookCertificateExpiring"}},
}

// epoch is the start of the simulated timeline, set so that it ends now: the
// certificate's notAfter, which the webhook reports in real time, is compared with
// the simulated time.
var epoch time.Time

func phaseAt(d time.Duration) string {
	for _, p := range timeline {
		if d >= p.from && d < p.to {
			return p.name
		}
	}
	return timeline[len(timeline)-1].name
}

func phaseNamed(name string) phase {
	for _, p := range timeline {
		if p.name == name {
			return p
		}
	}
	panic("no phase " + name)
}

func end() time.Duration { return timeline[len(timeline)-1].to }

// promqlParser is the parser the rules and the dashboard are read with: Prometheus'
// defaults.
var promqlParser = parser.NewParser(parser.Options{})

func newEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{
		MaxSamples:    10_000_000,
		Timeout:       time.Minute,
		LookbackDelta: 5 * time.Minute,
		Parser:        promqlParser,
	})
}

// TestMonitoring plays the scenario against the real binaries once, then checks the
// alerting rules and the dashboard of the monitoring overlay against what was scraped.
func TestMonitoring(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	s := startStack(t)
	rec := play(t, s)
	epoch = time.Now().UTC().Add(-end()).Truncate(time.Second)
	st := store(t, rec)
	overlay, err := manifests.Render(filepath.Join(testenv.RepoRoot(), manifests.Dir, manifests.Monitoring))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("build_info", func(t *testing.T) { checkBuildInfo(t, rec) })
	t.Run("alerts", func(t *testing.T) { checkAlerts(t, st, overlay) })
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, st, overlay) })
}

// store writes the recording into a Prometheus TSDB, one scrape every scrapeInterval.
// A series that the next phase's scrapes no longer return gets a staleness marker
// on that phase's first scrape, as Prometheus writes one for a series gone from its
// target or a target that fails.
func store(t *testing.T, rec recording) *teststorage.TestStorage {
	t.Helper()
	st := teststorage.New(t)
	app := st.Appender(context.Background())
	prev := map[string]labels.Labels{}
	for _, p := range timeline {
		samples, ok := rec[p.name]
		if !ok {
			t.Fatalf("the scenario recorded no scrape for phase %s", p.name)
		}
		cur := map[string]labels.Labels{}
		for _, s := range samples {
			lbls := make(map[string]string, len(s.Metric))
			for k, v := range s.Metric {
				lbls[string(k)] = string(v)
			}
			l := labels.FromMap(lbls)
			cur[l.String()] = l
		}
		for k, l := range prev {
			if _, ok := cur[k]; !ok {
				if _, err := app.Append(0, l, epoch.Add(p.from).UnixMilli(), math.Float64frombits(value.StaleNaN)); err != nil {
					t.Fatalf("staleness marker of %s at %s: %v", l, p.from, err)
				}
			}
		}
		prev = cur
		for at := p.from; at < p.to; at += scrapeInterval {
			ts := epoch.Add(at).UnixMilli()
			for _, s := range samples {
				lbls := make(map[string]string, len(s.Metric))
				for k, v := range s.Metric {
					lbls[string(k)] = string(v)
				}
				if _, err := app.Append(0, labels.FromMap(lbls), ts, float64(s.Value)); err != nil {
					t.Fatalf("append %s at %s: %v", s.Metric, at, err)
				}
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return st
}

// only returns the single rendered object of a kind.
func only(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the monitoring overlay renders %d %s objects, want 1", len(found), kind)
	}
	return found[0]
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkBuildInfo: both daemons export nicpool_build_info, 1, labelled with the version
// and revision the binaries were stamped with (as `make build` stamps them) and the
// Go that built them, so that a query can count the versions running side by side.
func checkBuildInfo(t *testing.T, rec recording) {
	want := map[string]string{"version": binaries.Version(), "revision": binaries.Revision(), "goversion": runtime.Version()}
	seen := map[string]bool{}
	for _, s := range rec["start"] {
		if s.Metric[model.MetricNameLabel] != "nicpool_build_info" {
			continue
		}
		job := string(s.Metric["job"])
		seen[job] = true
		if s.Value != 1 {
			t.Errorf("%s: nicpool_build_info = %v, want 1", job, s.Value)
		}
		for k, v := range want {
			if string(s.Metric[model.LabelName(k)]) != v {
				t.Errorf("%s: nicpool_build_info{%s=%q}, want %q", job, k, s.Metric[model.LabelName(k)], v)
			}
		}
	}
	if len(seen) != 2 {
		t.Errorf("nicpool_build_info scraped from %v, want both the webhook and ipamd", seen)
	}
}
