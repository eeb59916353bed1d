package pool_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/version"
	"github.com/nicpool/nicpool/webhook/admission/pool"
)

// A dry-run create of a SpiderIPPool with the version probe annotation is answered
// with a warning naming the webhook's build, whether the pool would be admitted or
// not; a pool created for real, or without the annotation, gets no such warning.
func TestVersionProbe(t *testing.T) {
	ctx := context.Background()
	warnings := &recordWarnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	answers := func() []version.Info {
		var out []version.Info
		for _, w := range warnings.got() {
			if i, ok := pool.ParseVersionAnswer(w); ok {
				out = append(out, i)
			}
		}
		warnings.mu.Lock()
		warnings.w = nil
		warnings.mu.Unlock()
		return out
	}
	probe := func(name string, ips ...string) *v2beta1.SpiderIPPool {
		p := fixtures.Pool(name, "10.146.0.0/24", ips)
		p.Annotations = map[string]string{pool.VersionProbeAnnotation: ""}
		return p
	}

	if err := c.Create(ctx, probe("probe", "10.146.0.10"), client.DryRunAll); err != nil {
		t.Fatalf("dry-run create of a valid pool: %v", err)
	}
	if got := answers(); !slices.Equal(got, []version.Info{version.Get()}) {
		t.Errorf("answers to an admitted probe %v; want this build %v", got, version.Get())
	}

	err = c.Create(ctx, probe("probe-bad", "10.147.0.10"), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.ips") {
		t.Fatalf("dry-run create of a pool whose ips are outside its subnet: %v; want denied", err)
	}
	if got := answers(); !slices.Equal(got, []version.Info{version.Get()}) {
		t.Errorf("answers to a denied probe %v; want this build %v", got, version.Get())
	}

	plain := fixtures.Pool("probe-plain", "10.146.0.0/24", []string{"10.146.0.10"})
	if err := c.Create(ctx, plain, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	real := probe("probe-real", "10.146.0.11")
	if err := c.Create(ctx, real); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, real) })
	if got := answers(); len(got) != 0 {
		t.Errorf("answers %v to a create that is no dry run, or has no probe annotation; want none", got)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "probe"}, &v2beta1.SpiderIPPool{}); err == nil {
		t.Error("the dry-run probe created a pool")
	}
}
