package pool_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/webhooktest"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/pool"
)

var env *webhooktest.Env

func TestMain(m *testing.M) { webhooktest.Main(m, &env, configs.Options{}) }

func mustContain(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a denial with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q:\n%v", w, err)
		}
	}
}

func totalIPCount(name string) int64 {
	p := &v2beta1.SpiderIPPool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil || p.Status.TotalIPCount == nil {
		return -1
	}
	return *p.Status.TotalIPCount
}

func TestDefaults(t *testing.T) {
	ctx := context.Background()
	p := fixtures.Pool("def-v4", "10.40.0.7/24", []string{"10.40.0.20-10.40.0.30", "10.40.0.10-10.40.0.25", "10.40.0.31"})
	p.Spec.ExcludeIPs = []string{"10.40.0.12", "10.40.0.11"}
	p.Spec.Gateway = ptr.To("10.40.0.1")
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := fixtures.GetPool(t, env.Client, "def-v4")
	if got.Spec.Subnet != "10.40.0.0/24" {
		t.Errorf("subnet %s; want canonical 10.40.0.0/24", got.Spec.Subnet)
	}
	if got.Spec.IPVersion == nil || *got.Spec.IPVersion != 4 {
		t.Errorf("ipVersion %v; want 4 derived from the subnet", got.Spec.IPVersion)
	}
	if !slices.Equal(got.Spec.IPs, []string{"10.40.0.10-10.40.0.31"}) {
		t.Errorf("ips %v; want merged [10.40.0.10-10.40.0.31]", got.Spec.IPs)
	}
	if !slices.Equal(got.Spec.ExcludeIPs, []string{"10.40.0.11-10.40.0.12"}) {
		t.Errorf("excludeIPs %v; want merged [10.40.0.11-10.40.0.12]", got.Spec.ExcludeIPs)
	}
	if !slices.Contains(got.Finalizers, v2beta1.PoolFinalizer) {
		t.Errorf("finalizers %v; want %s", got.Finalizers, v2beta1.PoolFinalizer)
	}
	fixtures.Eventually(t, "totalIPCount 20 (22 addresses minus 2 excluded)", func() bool { return totalIPCount("def-v4") == 20 })

	p6 := fixtures.Pool("def-v6", "FD00:40::/64", []string{"fd00:40::10-fd00:40::1f"})
	p6.Spec.Gateway = ptr.To("fd00:40::10")
	if err := env.Client.Create(ctx, p6); err != nil {
		t.Fatal(err)
	}
	got = fixtures.GetPool(t, env.Client, "def-v6")
	if got.Spec.Subnet != "fd00:40::/64" || got.Spec.IPVersion == nil || *got.Spec.IPVersion != 6 {
		t.Errorf("subnet %s ipVersion %v; want fd00:40::/64 and 6", got.Spec.Subnet, got.Spec.IPVersion)
	}
	fixtures.Eventually(t, "totalIPCount 15 (the gateway is never allocatable)", func() bool { return totalIPCount("def-v6") == 15 })

	// Reserved addresses are never allocatable.
	r := &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: "def-reserved"}, Spec: v2beta1.ReservedIPSpec{IPs: []string{"10.40.0.30-10.40.0.31", "10.40.0.29"}}}
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.Spec.IPVersion == nil || *r.Spec.IPVersion != 4 || !slices.Equal(r.Spec.IPs, []string{"10.40.0.29-10.40.0.31"}) {
		t.Errorf("reserved IP defaulted to ipVersion %v ips %v; want 4 and [10.40.0.29-10.40.0.31]", r.Spec.IPVersion, r.Spec.IPs)
	}
	fixtures.Eventually(t, "totalIPCount 17 after reserving 3 addresses", func() bool { return totalIPCount("def-v4") == 17 })
	// White space around any address field, and non-canonical spellings, are
	// written canonically: ipamd and the plugin parse strictly (a route gateway with a
	// leading space used to pass admission and then break every ADD on the pool).
	ws := fixtures.Pool("def-ws", " 10.47.0.0/24\n", []string{" 10.47.0.10 - 10.47.0.20 "})
	ws.Spec.ExcludeIPs = []string{"\t10.47.0.11 "}
	ws.Spec.Gateway = ptr.To(" 10.47.0.1\t")
	ws.Spec.Routes = []v2beta1.Route{{Dst: " 10.8.0.0/16 ", Gw: " 10.47.0.254"}, {Dst: "10.9.0.7/16", Gw: "10.47.0.253 "}}
	if err := env.Client.Create(ctx, ws); err != nil {
		t.Fatalf("pool with white space around its addresses: %v", err)
	}
	got = fixtures.GetPool(t, env.Client, "def-ws")
	if got.Spec.Subnet != "10.47.0.0/24" || !slices.Equal(got.Spec.IPs, []string{"10.47.0.10-10.47.0.20"}) || !slices.Equal(got.Spec.ExcludeIPs, []string{"10.47.0.11"}) ||
		got.Spec.Gateway == nil || *got.Spec.Gateway != "10.47.0.1" ||
		!slices.Equal(got.Spec.Routes, []v2beta1.Route{{Dst: "10.8.0.0/16", Gw: "10.47.0.254"}, {Dst: "10.9.0.0/16", Gw: "10.47.0.253"}}) {
		t.Errorf("pool with white space stored as %+v; want every address field canonical", got.Spec)
	}
	ws6 := fixtures.Pool("def-ws6", "FD00:47::/64", []string{"FD00:47::10-FD00:47::1F"})
	ws6.Spec.Gateway = ptr.To(" FD00:47::1")
	ws6.Spec.Routes = []v2beta1.Route{{Dst: "FD00:8::/48", Gw: "FD00:47::FE "}}
	if err := env.Client.Create(ctx, ws6); err != nil {
		t.Fatalf("IPv6 pool in capitals: %v", err)
	}
	got = fixtures.GetPool(t, env.Client, "def-ws6")
	if !slices.Equal(got.Spec.IPs, []string{"fd00:47::10-fd00:47::1f"}) || *got.Spec.Gateway != "fd00:47::1" ||
		!slices.Equal(got.Spec.Routes, []v2beta1.Route{{Dst: "fd00:8::/48", Gw: "fd00:47::fe"}}) {
		t.Errorf("IPv6 pool stored as %+v; want canonical lower case", got.Spec)
	}
	rws := &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: "def-reserved-ws"}, Spec: v2beta1.ReservedIPSpec{IPs: []string{" 10.47.0.30 ", "10.47.0.31 - 10.47.0.32"}}}
	if err := env.Client.Create(ctx, rws); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rws.Spec.IPs, []string{"10.47.0.30-10.47.0.32"}) {
		t.Errorf("reserved IP with white space stored as %v; want [10.47.0.30-10.47.0.32]", rws.Spec.IPs)
	}

	// A pool that only overlaps another's reserved addresses does not overlap it.
	if err := env.Client.Create(ctx, fixtures.Pool("def-v4-b", "10.40.0.0/24", []string{"10.40.0.29-10.40.0.40"})); err != nil {
		t.Errorf("pool def-v4-b shares only reserved addresses with def-v4; want admitted: %v", err)
	}
}

func TestPoolDenials(t *testing.T) {
	ctx := context.Background()
	if err := env.Client.Create(ctx, fixtures.Pool("base", "10.41.0.0/24", []string{"10.41.0.10-10.41.0.50"})); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, fixtures.Pool("base-wide", "10.42.0.0/16", []string{"10.42.0.10-10.42.0.50"})); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pool *v2beta1.SpiderIPPool
		edit func(*v2beta1.SpiderIPPool)
		want []string
		// schema: refused by the CRD's schema (format cidr) before the webhook.
		schema bool
	}{
		{name: "ips outside the subnet", pool: fixtures.Pool("d1", "10.43.0.0/24", []string{"10.43.1.10"}),
			want: []string{"spec.ips[0]", "must be inside subnet 10.43.0.0/24"}},
		{name: "excludeIPs outside the subnet", pool: fixtures.Pool("d2", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) { p.Spec.ExcludeIPs = []string{"10.44.0.1"} },
			want: []string{"spec.excludeIPs[0]", "must be inside subnet 10.43.0.0/24"}},
		{name: "range backwards", pool: fixtures.Pool("d3", "10.43.0.0/24", []string{"10.43.0.30-10.43.0.20"}),
			want: []string{"spec.ips[0]", "the first address of a range must not be greater than the last"}},
		{name: "ips of the other family", pool: fixtures.Pool("d4", "10.43.0.0/24", []string{"fd00::1"}),
			want: []string{"spec.ips[0]", "must be an IPv4 address or range"}},
		{name: "gateway outside the subnet", pool: fixtures.Pool("d5", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) { p.Spec.Gateway = ptr.To("10.99.0.1") },
			want: []string{"spec.gateway", "must be inside subnet 10.43.0.0/24"}},
		{name: "default route", pool: fixtures.Pool("d6", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) {
			p.Spec.Routes = []v2beta1.Route{{Dst: "0.0.0.0/0", Gw: "10.43.0.1"}}
		}, want: []string{"spec.routes[0].dst", "must not be a default route: the pool's spec.gateway is the default route"}},
		{name: "duplicate route destination", pool: fixtures.Pool("d7", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) {
			p.Spec.Routes = []v2beta1.Route{{Dst: "10.8.0.0/16", Gw: "10.43.0.1"}, {Dst: "10.8.0.0/16", Gw: "10.43.0.2"}}
		}, want: []string{"spec.routes[1].dst", "is already routed by spec.routes[0]"}},
		{name: "route via a gateway outside the subnet", pool: fixtures.Pool("d8", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) {
			p.Spec.Routes = []v2beta1.Route{{Dst: "10.8.0.0/16", Gw: "10.9.0.1"}}
		}, want: []string{"spec.routes[0].gw", "must be inside subnet 10.43.0.0/24"}},
		{name: "allocatable addresses overlap a pool of the same subnet", pool: fixtures.Pool("d9", "10.41.0.0/24", []string{"10.41.0.40-10.41.0.60"}),
			want: []string{"spec.ips", "overlaps the allocatable addresses of SpiderIPPool base in the same subnet (10.41.0.40-10.41.0.50)", "narrow spec.ips or add the overlap to spec.excludeIPs"}},
		{name: "subnet partly overlaps another pool's subnet", pool: fixtures.Pool("d10", "10.42.3.0/24", []string{"10.42.3.10"}),
			want: []string{"spec.subnet", "overlaps subnet 10.42.0.0/16 of SpiderIPPool base-wide"}},
		{name: "subnet with text after it", pool: fixtures.Pool("d12", "10.43.0.0/24 x", []string{"10.43.0.10"}),
			want: []string{"spec.subnet", "must be of type cidr"}, schema: true},
		{name: "ips separated by a space", pool: fixtures.Pool("d13", "10.43.0.0/24", []string{"10.43.0.10 10.43.0.11"}),
			want: []string{"spec.ips[0]", "must be an IP address or a range"}},
		{name: "excludeIPs separated by a comma", pool: fixtures.Pool("d14", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) { p.Spec.ExcludeIPs = []string{"10.43.0.10,10.43.0.11"} },
			want: []string{"spec.excludeIPs[0]", "must be an IP address or a range"}},
		{name: "gateway with text after it", pool: fixtures.Pool("d15", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) { p.Spec.Gateway = ptr.To("10.43.0.1 x") },
			want: []string{"spec.gateway", "must be an IP address"}},
		{name: "gateway with a space inside", pool: fixtures.Pool("d16", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) { p.Spec.Gateway = ptr.To("10.43. 0.1") },
			want: []string{"spec.gateway", "must be an IP address"}},
		{name: "gateway with an IPv6 zone", pool: fixtures.Pool("d17", "fd00:43::/64", []string{"fd00:43::10"}), edit: func(p *v2beta1.SpiderIPPool) { p.Spec.Gateway = ptr.To("fd00:43::1%eth0") },
			want: []string{"spec.gateway", "must be an IP address"}},
		{name: "route gateway with a space inside", pool: fixtures.Pool("d18", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) {
			p.Spec.Routes = []v2beta1.Route{{Dst: "10.8.0.0/16", Gw: "10.43.0. 1"}}
		}, want: []string{"spec.routes[0].gw", "must be an IP address"}},
		{name: "route destination with a space inside", pool: fixtures.Pool("d19", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) {
			p.Spec.Routes = []v2beta1.Route{{Dst: "10.8.0.0 /16", Gw: "10.43.0.1"}}
		}, want: []string{"spec.routes[0].dst", "must be of type cidr"}, schema: true},
		{name: "route gateway of the other family", pool: fixtures.Pool("d20", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) {
			p.Spec.Routes = []v2beta1.Route{{Dst: "10.8.0.0/16", Gw: "::ffff:10.43.0.1"}}
		}, want: []string{"spec.routes[0].gw"}},
		{name: "invalid podAffinity", pool: fixtures.Pool("d11", "10.43.0.0/24", []string{"10.43.0.10"}), edit: func(p *v2beta1.SpiderIPPool) {
			p.Spec.PodAffinity = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
		}, want: []string{"spec.podAffinity", "must be a valid label selector"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edit != nil {
				tc.edit(tc.pool)
			}
			err := env.Client.Create(ctx, tc.pool)
			if !tc.schema {
				tc.want = append([]string{`admission webhook "spiderippools.nicpool.io" denied the request`}, tc.want...)
			}
			mustContain(t, err, tc.want...)
		})
	}
	// A pool in the same subnet with disjoint addresses is fine.
	if err := env.Client.Create(ctx, fixtures.Pool("base-2", "10.41.0.0/24", []string{"10.41.0.51-10.41.0.60"})); err != nil {
		t.Errorf("disjoint pool in the same subnet: %v", err)
	}
}

func TestPoolUpdatesAndDelete(t *testing.T) {
	ctx := context.Background()
	if err := env.Client.Create(ctx, fixtures.Pool("upd", "10.45.0.0/24", []string{"10.45.0.10-10.45.0.20"})); err != nil {
		t.Fatal(err)
	}
	setAllocated(t, "upd", v2beta1.PoolIPAllocations{"10.45.0.12": {Pod: "team/web-0", PodUID: "u-1", Interface: "net1"}})

	update := func(edit func(*v2beta1.SpiderIPPool)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := fixtures.GetPool(t, env.Client, "upd")
			edit(p)
			return env.Client.Update(ctx, p)
		})
	}
	t.Run("subnet is immutable", func(t *testing.T) {
		mustContain(t, update(func(p *v2beta1.SpiderIPPool) { p.Spec.Subnet = "10.46.0.0/24"; p.Spec.IPs = []string{"10.46.0.10"} }), "subnet is immutable")
	})
	t.Run("ipVersion is immutable", func(t *testing.T) {
		mustContain(t, update(func(p *v2beta1.SpiderIPPool) { p.Spec.IPVersion = ptr.To(int64(6)) }), "ipVersion")
	})
	t.Run("an allocated address may not leave ips", func(t *testing.T) {
		mustContain(t, update(func(p *v2beta1.SpiderIPPool) { p.Spec.IPs = []string{"10.45.0.13-10.45.0.20"} }),
			"spec: Forbidden: would make 1 allocated address(es) unallocatable (10.45.0.12 held by pod team/web-0 interface net1)")
	})
	t.Run("an allocated address may not be excluded", func(t *testing.T) {
		mustContain(t, update(func(p *v2beta1.SpiderIPPool) { p.Spec.ExcludeIPs = []string{"10.45.0.12"} }), "10.45.0.12 held by pod team/web-0")
	})
	t.Run("an allocated address may not become the gateway", func(t *testing.T) {
		mustContain(t, update(func(p *v2beta1.SpiderIPPool) { p.Spec.Gateway = ptr.To("10.45.0.12") }), "10.45.0.12 held by pod team/web-0")
	})
	t.Run("metadata changes are fine", func(t *testing.T) {
		if err := update(func(p *v2beta1.SpiderIPPool) { p.Labels = map[string]string{"team": "a"} }); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("growing the pool is fine", func(t *testing.T) {
		if err := update(func(p *v2beta1.SpiderIPPool) { p.Spec.IPs = []string{"10.45.0.10-10.45.0.30"} }); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, "totalIPCount 21", func() bool { return totalIPCount("upd") == 21 })
	})
	t.Run("with the option to refuse, a delete is refused while addresses are allocated", func(t *testing.T) {
		refusing := &pool.Validator{Reader: env.Client, RefuseDeleteWhileAllocated: true}
		_, err := refusing.ValidateDelete(ctx, fixtures.GetPool(t, env.Client, "upd"))
		mustContain(t, err, "the pool still has 1 allocated address(es) (10.45.0.12 held by pod team/web-0 interface net1)", "delete those pods")
		if !apierrors.IsForbidden(err) {
			t.Errorf("reason %s; want Forbidden", apierrors.ReasonForError(err))
		}
	})
	t.Run("a delete is accepted while addresses are allocated; the finalizer holds the pool", func(t *testing.T) {
		// As spiderpool does: a script deleting a namespace and then its pools succeeds.
		warnings := &recordWarnings{}
		cfg := rest.CopyConfig(env.Config)
		cfg.WarningHandler = warnings
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, fixtures.GetPool(t, env.Client, "upd")); err != nil {
			t.Fatalf("delete of a pool holding an address: %v; want accepted", err)
		}
		if p := fixtures.GetPool(t, env.Client, "upd"); p.DeletionTimestamp == nil || !slices.Contains(p.Finalizers, v2beta1.PoolFinalizer) {
			t.Errorf("deletionTimestamp %v finalizers %v; want terminating, held by %s", p.DeletionTimestamp, p.Finalizers, v2beta1.PoolFinalizer)
		}
		if !slices.ContainsFunc(warnings.got(), func(w string) bool {
			return strings.Contains(w, "pool upd still has 1 allocated address(es) (10.45.0.12 held by pod team/web-0 interface net1): it serves nothing new and is removed once they are released")
		}) {
			t.Errorf("warnings %q; want one naming the address still held", warnings.got())
		}
		recs, err := ledger.PoolRecords(ctx, env.Client, "upd")
		if err != nil || len(recs) != 1 {
			t.Errorf("records of the terminating pool: %v %v; want the one it held", recs, err)
		}
	})
}

// recordWarnings keeps the API server's warnings.
type recordWarnings struct {
	mu sync.Mutex
	w  []string
}

func (r *recordWarnings) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	r.w = append(r.w, text)
	r.mu.Unlock()
}

func (r *recordWarnings) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.w)
}

// setAllocated makes alloc the pool's allocations, written through the ledger as
// ipamd's and the garbage collector's writes are.
func setAllocated(t *testing.T, name string, alloc v2beta1.PoolIPAllocations) {
	t.Helper()
	ctx := context.Background()
	// Written as nicpool's service account: the policies let nobody else write records.
	l := ledger.New(ledger.Options{Cache: env.Client, Client: env.Nicpool, Fresh: env.Client, Log: logr.Discard()})
	recs, _, err := ledger.List(ctx, env.Client)
	if err != nil {
		t.Fatal(err)
	}
	var gone []ledger.Record
	for _, r := range recs {
		if r.Pool == name && alloc[r.Addr.String()] != r.Holder {
			gone = append(gone, r)
		}
	}
	if _, err := l.ReleaseRecords(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := l.Import(ctx, fixtures.GetPool(t, env.Client, name), alloc); err != nil {
		t.Fatal(err)
	}
}

func TestReservedIPDenials(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		r    v2beta1.ReservedIPSpec
		want string
	}{
		{name: "r-bad", r: v2beta1.ReservedIPSpec{IPs: []string{"10.1.1"}}, want: "spec.ips[0]"},
		{name: "r-mixed", r: v2beta1.ReservedIPSpec{IPs: []string{"10.1.1.1", "fd00::1"}}, want: "spec.ips[1]: Invalid value: \"fd00::1\": must be an IPv4 address or range"},
		{name: "r-backwards", r: v2beta1.ReservedIPSpec{IPs: []string{"10.1.1.9-10.1.1.1"}}, want: "the first address of a range must not be greater than the last"},
		{name: "r-family", r: v2beta1.ReservedIPSpec{IPVersion: ptr.To(int64(6)), IPs: []string{"10.1.1.1"}}, want: "must be an IPv6 address or range"},
		{name: "r-space-inside", r: v2beta1.ReservedIPSpec{IPs: []string{"10.1.1. 1"}}, want: "spec.ips[0]"},
		{name: "r-zone", r: v2beta1.ReservedIPSpec{IPs: []string{"fe80::1%eth0"}}, want: "spec.ips[0]"},
	} {
		err := env.Client.Create(ctx, &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: tc.r})
		mustContain(t, err, `admission webhook "spiderreservedips.nicpool.io" denied the request`, tc.want)
	}
}

// With a family disabled, a reservation of it kept from before is refused only by an
// update that changes its spec: its labels can still change, its addresses cannot.
// The validator alone: the webhook of this package's control plane has every family on.
func TestReservedIPUpdateOfADisabledFamily(t *testing.T) {
	ctx := context.Background()
	v := pool.ReservedValidator{Switches: ipamconf.Switches{NoIPv6: true}}
	old := &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: "r6"}, Spec: v2beta1.ReservedIPSpec{IPVersion: ptr.To(int64(6)), IPs: []string{"fd00::5"}}}
	_, err := v.ValidateCreate(ctx, old)
	mustContain(t, err, "spec.ipVersion", "IPv6 is disabled")
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	if _, err := v.ValidateUpdate(ctx, old, labelled); err != nil {
		t.Errorf("a label added to a reservation of a disabled family is refused: %v", err)
	}
	changed := old.DeepCopy()
	changed.Spec.IPs = append(changed.Spec.IPs, "fd00::6")
	_, err = v.ValidateUpdate(ctx, old, changed)
	mustContain(t, err, "spec.ipVersion", "IPv6 is disabled")
	bad := old.DeepCopy()
	bad.Spec.IPs = []string{"10.1.1.1"}
	_, err = v.ValidateUpdate(ctx, bad, bad)
	mustContain(t, err, "spec.ips[0]", "must be an IPv6 address or range")
}
