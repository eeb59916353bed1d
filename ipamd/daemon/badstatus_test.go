package daemon_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

// A pool whose status nicpool cannot use costs that pool alone. One holds spiderpool's
// string of records (a migration interrupted before it moved them into blocks), one a
// status.allocatedIPs that decodes as nothing nicpool knows: an ipamd that starts
// with them syncs its caches, serves every other pool, refuses an ADD from either bad
// pool with a message naming it and the fix, and its log names each bad pool.
func TestBadPoolStatusAtStartCostsOnlyThatPool(t *testing.T) {
	ctx := context.Background()
	const ns, node = "badst", "badst-node"
	createNamespace(t, ns)
	fixtures.CreatePool(t, env.Client, fixtures.Pool("badst-good", "172.31.0.0/24", []string{"172.31.0.10-172.31.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("badst-spiderpool", "172.31.1.0/24", []string{"172.31.1.10-172.31.1.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("badst-broken", "172.31.2.0/24", []string{"172.31.2.10-172.31.2.20"}))
	// As spiderpool's CRD stored them (the same objects, under nicpool's CRD since).
	fixtures.StoreAllocatedIPs(t, env.Client, "badst-spiderpool", `{"172.31.1.10":{"pod":"badst/old","podUid":"uid-old"}}`)
	fixtures.StoreAllocatedIPs(t, env.Client, "badst-broken", 42)
	t.Cleanup(func() {
		for _, name := range []string{"badst-good", "badst-spiderpool", "badst-broken"} {
			_ = env.Client.Delete(context.Background(), &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})

	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		lines = append(lines, prefix+" "+args)
		mu.Unlock()
	}, funcr.Options{})
	cfg := rest.CopyConfig(env.Config)
	var dialer net.Dialer
	cfg.Dial = dialer.DialContext
	d, err := daemon.New(cfg, daemon.Options{NodeName: node, Scheme: env.Scheme, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	// Caches that never sync fail the test instead of hanging it.
	stop := time.AfterFunc(2*time.Minute, cancel)
	if _, err := d.Start(runCtx); err != nil {
		t.Fatalf("ipamd with a bad pool in the cluster: %v", err)
	}
	stop.Stop()

	add := func(pod, pool string) (string, error) {
		p := createPod(t, ns, pod, node, withAnnotations(annotations.IPPools, fmt.Sprintf(`[{"interface":"eth0","ipv4":[%q]}]`, pool)))
		r, err := d.Service.Allocate(ctx, addReq(p, "eth0", "c-"+pod))
		if err != nil {
			return "", err
		}
		return strings.Join(addresses(r), ","), nil
	}
	if got, err := add("good", "badst-good"); err != nil || !strings.HasPrefix(got, "172.31.0.") {
		t.Errorf("ADD from the good pool: %q, %v; want an address of 172.31.0.0/24", got, err)
	}
	for _, tc := range []struct{ pod, pool, want string }{
		{"from-spiderpool", "badst-spiderpool", "allocate from pool badst-spiderpool: its status.allocatedIPs holds spiderpool's records, not moved into IPBlocks yet: finish the migration with kubectl nicpool migrate from-spiderpool --apply"},
		{"from-broken", "badst-broken", "allocate from pool badst-broken: its status does not decode"},
	} {
		got, err := add(tc.pod, tc.pool)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ADD from %s: %q, %v; want a refusal with %q", tc.pool, got, err, tc.want)
		}
	}
	if n := len(records(t, "badst-spiderpool")); n != 0 {
		t.Errorf("the pool with spiderpool's records has %d records in blocks; want none written", n)
	}
	mu.Lock()
	logged := strings.Join(lines, "\n")
	mu.Unlock()
	for _, want := range []string{`"pool"="badst-spiderpool"`, `"pool"="badst-broken"`} {
		if !strings.Contains(logged, want) {
			t.Errorf("ipamd's log does not name the bad pool (%s):\n%s", want, logged)
		}
	}
	checkInvariants(t, false)
}
