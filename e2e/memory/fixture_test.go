package memory

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// fixture is the cluster state a measurement runs against: Pools pools of
// PerPool+Free addresses, PerPool of them allocated, each allocated address held by
// one pod (interface eth0) with its SpiderEndpoint, as ipamd would have left them.
// Pod i of every pool runs on node i%Nodes, so a pool spans every node and each node
// holds Pools*PerPool/Nodes pods.
type fixture struct {
	// Name prefixes the namespace, the pools and the nodes, so fixtures do not meet.
	Name                 string
	Pools, PerPool, Free int
	Nodes                int
	// Octet is the second octet of the first pool's subnet 10.<Octet>.0.0/16; pool p
	// uses 10.<Octet+p>.0.0/16.
	Octet int
}

func (f fixture) namespace() string   { return f.Name }
func (f fixture) pool(p int) string   { return fmt.Sprintf("%s-pool-%d", f.Name, p) }
func (f fixture) node(i int) string   { return fmt.Sprintf("%s-node-%d", f.Name, i%f.Nodes) }
func (f fixture) pod(p, i int) string { return fmt.Sprintf("%s-p%d-%04d", f.Name, p, i) }
func (f fixture) pods() int           { return f.Pools * f.PerPool }

// address is the i-th address of pool p: 10.<Octet+p>.0.1 onwards.
func (f fixture) address(p, i int) netip.Addr {
	first := [4]byte{10, byte(f.Octet + p), 0, 1}
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], binary.BigEndian.Uint32(first[:])+uint32(i))
	return netip.AddrFrom4(out)
}

func (f fixture) poolNames() []string {
	names := make([]string, f.Pools)
	for p := range names {
		names[p] = f.pool(p)
	}
	return names
}

// podObject is a pod as a user writes it and the webhook leaves it: its pool named
// per interface, labels of a Deployment, one container.
func (f fixture) podObject(p, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: f.namespace(), Name: f.pod(p, i),
			Labels: map[string]string{"app": fmt.Sprintf("%s-app-%d", f.Name, p), "pod-template-hash": "5d8f7c9b6d"},
			Annotations: map[string]string{
				annotations.IPPool:  fmt.Sprintf(`{"ipv4":[%q]}`, f.pool(p)),
				annotations.IPPools: fmt.Sprintf(`[{"interface":"eth0","ipv4":[%q]}]`, f.pool(p)),
			},
		},
		Spec: corev1.PodSpec{
			NodeName: f.node(i),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:1.0",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}
}

// populate writes the fixture into the API server: namespace, pools, pods, endpoints
// (with status: the CRD has no status subresource), then each pool's allocatedIPs
// with the pods' real UIDs, so the webhook's garbage collector finds every holder
// alive and releases nothing.
func populate(tb testing.TB, c client.Client, f fixture) {
	tb.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.namespace()}}); err != nil {
		tb.Fatalf("create namespace %s: %v", f.namespace(), err)
	}
	for p := range f.Pools {
		pool := &v2beta1.SpiderIPPool{
			ObjectMeta: metav1.ObjectMeta{Name: f.pool(p)},
			Spec: v2beta1.IPPoolSpec{
				Subnet: fmt.Sprintf("10.%d.0.0/16", f.Octet+p),
				IPs:    []string{f.address(p, 0).String() + "-" + f.address(p, f.PerPool+f.Free-1).String()},
			},
		}
		if err := c.Create(ctx, pool); err != nil {
			tb.Fatalf("create pool %s: %v", pool.Name, err)
		}
	}
	uids := make([]string, f.pods())
	inParallel(tb, f.pods(), func(k int) error {
		pod := f.podObject(k/f.PerPool, k%f.PerPool)
		if err := c.Create(ctx, pod); err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		uids[k] = string(pod.UID)
		return nil
	})
	inParallel(tb, f.pods(), func(k int) error {
		p, i := k/f.PerPool, k%f.PerPool
		cidr, pool := f.address(p, i).String()+"/16", f.pool(p)
		atts, _ := json.Marshal(map[string]endpoint.Attachment{"eth0": {ContainerID: fmt.Sprintf("%064x", k), Network: "macvlan"}})
		ep := &v2beta1.SpiderEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace(), Name: f.pod(p, i),
				Annotations: map[string]string{endpoint.AttachmentsAnnotation: string(atts)}},
			Status: v2beta1.WorkloadEndpointStatus{
				Current: v2beta1.PodIPAllocation{UID: uids[k], Node: f.node(i),
					IPs: []v2beta1.IPAllocationDetail{{Interface: "eth0", IPv4: &cidr, IPv4Pool: &pool}}},
				OwnerControllerType: "Pod", OwnerControllerName: f.pod(p, i),
			},
		}
		if err := c.Create(ctx, ep); err != nil {
			return fmt.Errorf("create endpoint %s: %w", ep.Name, err)
		}
		return nil
	})
	// Each node's records go into blocks of that node, as its ADDs would have written
	// them (a block whose addresses several nodes took is the first one's).
	for p := range f.Pools {
		pool := &v2beta1.SpiderIPPool{}
		if err := c.Get(ctx, client.ObjectKey{Name: f.pool(p)}, pool); err != nil {
			tb.Fatal(err)
		}
		byNode := map[string]v2beta1.PoolIPAllocations{}
		for i := range f.PerPool {
			n := f.node(i)
			if byNode[n] == nil {
				byNode[n] = v2beta1.PoolIPAllocations{}
			}
			byNode[n][f.address(p, i).String()] = v2beta1.PoolIPAllocation{
				Pod: f.namespace() + "/" + f.pod(p, i), PodUID: uids[p*f.PerPool+i], Interface: "eth0"}
		}
		for n, recs := range byNode {
			l := ledger.New(ledger.Options{Node: n, Cache: c, Client: c, Fresh: c, Log: logr.Discard()})
			if err := l.Import(ctx, pool, recs); err != nil {
				tb.Fatalf("write the blocks of pool %s: %v", f.pool(p), err)
			}
		}
	}
}

// inParallel runs fn for 0..n-1 on a few workers and fails tb with the first error.
func inParallel(tb testing.TB, n int, fn func(int) error) {
	tb.Helper()
	const workers = 16
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Go(func() {
			for k := range next {
				if err := fn(k); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for k := range n {
		next <- k
	}
	close(next)
	wg.Wait()
	if first != nil {
		tb.Fatal(first)
	}
}
