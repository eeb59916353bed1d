package daemon_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/invariants"
)

// The checker itself: each broken state it exists for is reported, named. (The CRD
// schema already refuses an empty interface, the I1 case.)
func TestInvariantCheckerReportsViolations(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "broken")
	recs := v2beta1.PoolIPAllocations{
		"10.99.0.1": {Pod: "broken/a", PodUID: "uid-a", Interface: "eth0"}, // I3 with the endpoint
		"10.99.0.2": {Pod: "broken/b", PodUID: "uid-b", Interface: "eth0"}, // I2 with .3
		"10.99.0.3": {Pod: "broken/b", PodUID: "uid-b", Interface: "eth0"},
	}
	var made []*v2beta1.SpiderIPPool
	for _, name := range []string{"broken-1", "broken-2"} {
		fixtures.CreatePool(t, env.Client, fixtures.Pool(name, "10.99.0.0/16", []string{"10.99.0.1-10.99.0.9"}))
		fixtures.WriteOlderLayout(t, env.Client, name, recs)
		made = append(made, fixtures.GetPool(t, env.Client, name))
		recs = v2beta1.PoolIPAllocations{"10.99.0.2": {Pod: "broken/c", PodUID: "uid-c", Interface: "eth0"}} // I3 with broken-1
	}
	ep := &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "broken", Name: "gone"},
		Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: "uid-gone", IPs: []v2beta1.IPAllocationDetail{
			{Interface: "eth0", IPv4: ptr("10.99.0.1/16"), IPv4Pool: ptr("broken-1")}}}}}
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	err := invariants.Check(ctx, env.Client, invariants.Options{Converged: true})
	for _, want := range []string{
		"I3: endpoint broken/gone (pod UID uid-gone) interface eth0 records 10.99.0.1, which pool broken-1 gives to pod UID uid-a",
		`I2: pod UID uid-b interface "eth0" holds 2 IPv4 addresses`,
		"I3: 10.99.0.2 is allocated in pool",
		"I4: endpoint broken/gone belongs to pod UID uid-gone, which is gone",
		"I4: broken-2/10.99.0.2 is held by pod broken/c UID uid-c, which is gone",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checker did not report %q; got:\n%v", want, err)
		}
	}
	// Leave a clean cluster for the other tests' checks.
	if err := env.Client.Delete(ctx, ep); err != nil {
		t.Fatal(err)
	}
	for _, p := range made {
		if err := env.Client.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, false)
}

// I8: a record's pod is the endpoint that lists it. An endpoint naming the UID of a pod
// of another name, and listing that pod's address, is reported even though UID and
// interface agree.
func TestInvariantCheckerReportsRecordOfAnotherPod(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "i8")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("i8", "172.22.0.0/16", []string{"172.22.0.1-172.22.0.9"}))
	fixtures.WriteOlderLayout(t, env.Client, "i8", v2beta1.PoolIPAllocations{"172.22.0.1": {Pod: "i8/real", PodUID: "uid-real", Interface: "eth0"}})
	p := fixtures.GetPool(t, env.Client, "i8")
	ep := &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "i8", Name: "other"},
		Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: "uid-real", IPs: []v2beta1.IPAllocationDetail{
			{Interface: "eth0", IPv4: ptr("172.22.0.1/16"), IPv4Pool: ptr("i8")}}}}}
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	err := invariants.Check(ctx, env.Client, invariants.Options{})
	want := "I8: endpoint i8/other interface eth0 lists 172.22.0.1 of pool i8, whose record names pod i8/real (UID uid-real)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checker did not report %q; got:\n%v", want, err)
	}
	if err := env.Client.Delete(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, false)
}
