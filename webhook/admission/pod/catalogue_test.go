package pod_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// badInput is one pod the webhook must refuse, with what the user must read.
type badInput struct {
	name     string
	labels   map[string]string
	networks string // k8s.v1.cni.cncf.io/networks
	pools    string // ipam.spidernet.io/ippools
	single   string // ipam.spidernet.io/ippool
	owners   []metav1.OwnerReference
	// want are substrings of the API server's error: the field and the fix.
	want []string
}

// catalogue is every way a pod's nicpool annotations can be wrong that admission
// catches. It is the one list of bad inputs: TestCatalogue creates each pod through
// the API server and checks the message.
var catalogue = []badInput{
	{name: "ippools is not JSON", pools: `[{"ipv4":["c-v4-a"]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", "must be a JSON list such as"}},
	{name: "ippools is an object, not a list", pools: `{"ipv4":["c-v4-a"]}`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", "must be a JSON list such as"}},
	{name: "ippools has trailing data", pools: `[{"ipv4":["c-v4-a"]}] x`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", "must be a JSON list"}},
	{name: "ippools entry has an unknown field", pools: `[{"ipv4s":["c-v4-a"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", `unknown field "ipv4s"`}},
	{name: "ippools is an empty list", pools: `[]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", "at least one entry", "remove the annotation to use default pools"}},
	{name: "entry with neither ipv4 nor ipv6", pools: `[{"interface":"eth0"}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0]", `at least one pool in "ipv4" or "ipv6"`}},
	{name: "entry with empty pool lists", pools: `[{"ipv4":[],"ipv6":[]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0]", `at least one pool in "ipv4" or "ipv6"`}},
	{name: "named and unnamed entries mixed", networks: "macvlan-a", pools: `[{"interface":"eth0","ipv4":["c-v4-a"]},{"ipv4":["c-v4-b"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", `either every entry names its "interface" or none does`}},
	{name: "duplicate interface", networks: "macvlan-a", pools: `[{"interface":"net1","ipv4":["c-v4-a"]},{"interface":"net1","ipv4":["c-v4-b"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][1].interface", "entry 0 already selects this interface; each interface may appear once"}},
	{name: "more entries than interfaces", networks: "macvlan-a", pools: `[{"ipv4":["c-v4-a"]},{"ipv4":["c-v4-b"]},{"ipv4":["c-v4-c"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", "has more entries than the pod has interfaces (eth0, net1", "add the networks to k8s.v1.cni.cncf.io/networks or remove entries"}},
	{name: "entries but no secondary network", pools: `[{"ipv4":["c-v4-a"]},{"ipv4":["c-v4-b"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools]", "has more entries than the pod has interfaces (eth0, from"}},
	{name: "an interface the pod does not have", networks: "macvlan-a", pools: `[{"interface":"net2","ipv4":["c-v4-a"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].interface", "net2: the pod's interfaces are eth0, net1", "name one of them or fix the networks annotation"}},
	{name: "interface named by default name after an explicit rename", networks: "macvlan-a@data0", pools: `[{"interface":"net1","ipv4":["c-v4-a"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].interface", "the pod's interfaces are eth0, data0"}},
	{name: "interface name too long", pools: `[{"interface":"a-very-long-interface","ipv4":["c-v4-a"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].interface", "may not be more than 15"}},
	{name: "unknown IPv4 pool", pools: `[{"ipv4":["c-nope"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", `"c-nope"`, "no SpiderIPPool of this name exists: create it or name an existing pool"}},
	{name: "unknown IPv6 pool", pools: `[{"ipv4":["c-v4-a"],"ipv6":["c-nope6"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv6[0]", "no SpiderIPPool of this name exists"}},
	{name: "IPv6 pool in the ipv4 list", pools: `[{"ipv4":["c-v6-a"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", `is an IPv6 pool (subnet fd00:71::/64) but is listed under "ipv4": move it to "ipv6" or name an IPv4 pool`}},
	{name: "IPv4 pool in the ipv6 list", pools: `[{"ipv6":["c-v4-a"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv6[0]", `is an IPv4 pool (subnet 10.71.0.0/24) but is listed under "ipv6": move it to "ipv4"`}},
	{name: "disabled pool", pools: `[{"ipv4":["c-disabled"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", "SpiderIPPool is disabled (spec.disable: true): enable it or choose another pool"}},
	{name: "terminating pool", pools: `[{"ipv4":["c-terminating"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", "SpiderIPPool is being deleted: choose another pool"}},
	{name: "namespaceName excludes the pod's namespace", pools: `[{"ipv4":["c-ns-other"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", `is restricted by spec.namespaceName to [other-team]: add namespace "catalogue" there or choose another pool`}},
	{name: "namespaceAffinity excludes the pod's namespace", pools: `[{"ipv4":["c-ns-affinity"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", `spec.namespaceAffinity (team=blue) does not match the labels of namespace "catalogue": label the namespace or choose another pool`}},
	{name: "podAffinity excludes the pod", labels: map[string]string{"app": "web"}, pools: `[{"ipv4":["c-pod-affinity"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", "spec.podAffinity (app=db) does not match the pod's labels: label the pod or choose another pool"}},
	{name: "wildcard matches nothing", pools: `[{"ipv4":["zz-*"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", `"zz-*"`, "wildcard matches no IPv4 SpiderIPPool this pod may use: create a matching pool or correct the pattern"}},
	{name: "wildcard matches only pools of the other family", pools: `[{"ipv4":["c-v6-*"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", "wildcard matches no IPv4 SpiderIPPool this pod may use (c-v6-a is IPv6)"}},
	{name: "wildcard matches only unusable pools", pools: `[{"ipv4":["c-d*"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", "(c-disabled is disabled (spec.disable: true)"}},
	{name: "malformed wildcard", pools: `[{"ipv4":["c-[v4"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", "malformed wildcard: use *, ? and [...] as in shell patterns"}},
	{name: "pool name is not a valid name", pools: `[{"ipv4":["Pool_A"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[0]", "must be a SpiderIPPool name"}},
	{name: "pool listed twice", pools: `[{"ipv4":["c-v4-a","c-v4-a"]}]`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippools][0].ipv4[1]", "Duplicate value"}},
	{name: "errors in several entries are all reported", networks: "macvlan-a", pools: `[{"ipv4":["c-nope"]},{"ipv4":["c-disabled"]}]`,
		want: []string{"[0].ipv4[0]", "no SpiderIPPool of this name exists", "[1].ipv4[0]", "is disabled"}},
	{name: "Multus networks malformed", networks: "team/a/b", pools: `[{"ipv4":["c-v4-a"]}]`,
		want: []string{"metadata.annotations[k8s.v1.cni.cncf.io/networks][0]", "must be [namespace/]name[@interface]"}},
	{name: "Multus networks name one interface twice", networks: "macvlan-a@net2, macvlan-b", pools: `[{"ipv4":["c-v4-a"]}]`,
		want: []string{"metadata.annotations[k8s.v1.cni.cncf.io/networks][1]", `interface "net2" of network catalogue/macvlan-b is already used by network catalogue/macvlan-a`}},
	{name: "ippool is not JSON", single: `{"ipv4":`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippool]", "must be a JSON object such as"}},
	{name: "ippool with neither ipv4 nor ipv6", single: `{"cleangateway":true}`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippool]", `at least one pool in "ipv4" or "ipv6"`}},
	{name: "ippool has an unknown field beside the interface it may carry", single: `{"interface":"eth0","ipv4":["c-v4-a"],"ipv4pools":["c-v4-b"]}`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippool]", `unknown field "ipv4pools"`}},
	{name: "ippool names an unknown pool", single: `{"ipv4":["c-nope"]}`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippool].ipv4[0]", "no SpiderIPPool of this name exists"}},
	{name: "ippool names a pool of the wrong family", single: `{"ipv6":["c-v4-a"]}`,
		want: []string{"metadata.annotations[ipam.spidernet.io/ippool].ipv6[0]", `is an IPv4 pool (subnet 10.71.0.0/24) but is listed under "ipv6"`}},
	{name: "a hand-written StatefulSet controller reference", pools: `[{"ipv4":["c-v4-a"]}]`,
		owners: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "00000000-0000-4000-8000-00000000f00d", Controller: ptr.To(true)}},
		want:   []string{"metadata.ownerReferences", "the pod names StatefulSet db (UID 00000000-0000-4000-8000-00000000f00d) as its controller, but namespace catalogue has no StatefulSet db"}},
}

func TestCatalogue(t *testing.T) {
	if len(catalogue) < 25 {
		t.Fatalf("the catalogue has %d bad inputs; keep at least 25", len(catalogue))
	}
	ctx := context.Background()
	createNamespace(t, "catalogue", map[string]string{"team": "red"})
	createPools(t,
		fixtures.Pool("c-v4-a", "10.71.0.0/24", []string{"10.71.0.10-10.71.0.20"}),
		fixtures.Pool("c-v4-b", "10.72.0.0/24", []string{"10.72.0.10-10.72.0.20"}),
		fixtures.Pool("c-v4-c", "10.73.0.0/24", []string{"10.73.0.10-10.73.0.20"}),
		fixtures.Pool("c-v6-a", "fd00:71::/64", []string{"fd00:71::10-fd00:71::20"}),
		fixtures.Pool("c-disabled", "10.74.0.0/24", []string{"10.74.0.10-10.74.0.20"}, func(p *v2beta1.SpiderIPPool) { p.Spec.Disable = ptr.To(true) }),
		fixtures.Pool("c-terminating", "10.75.0.0/24", []string{"10.75.0.10-10.75.0.20"}),
		fixtures.Pool("c-ns-other", "10.76.0.0/24", []string{"10.76.0.10-10.76.0.20"}, func(p *v2beta1.SpiderIPPool) { p.Spec.NamespaceName = []string{"other-team"} }),
		fixtures.Pool("c-ns-affinity", "10.77.0.0/24", []string{"10.77.0.10-10.77.0.20"}, func(p *v2beta1.SpiderIPPool) {
			p.Spec.NamespaceAffinity = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
		}),
		fixtures.Pool("c-pod-affinity", "10.78.0.0/24", []string{"10.78.0.10-10.78.0.20"}, func(p *v2beta1.SpiderIPPool) {
			p.Spec.PodAffinity = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		}),
	)
	// The pool webhook gives every pool its finalizer, so deleting an empty pool
	// leaves it terminating until the garbage collector lets it go.
	if err := env.Client.Delete(ctx, &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "c-terminating"}}); err != nil {
		t.Fatalf("delete c-terminating: %v", err)
	}
	fixtures.Eventually(t, "c-terminating to be terminating in the webhook's view", func() bool {
		p, _ := env.Views.Pools.Get(ctx, "c-terminating", views.NewLiveReads(0))
		return p != nil && p.Terminating
	})

	for i, tc := range catalogue {
		t.Run(tc.name, func(t *testing.T) {
			ann := selectionAnnotations(tc.networks, tc.pools, tc.single)
			p := newPod("catalogue", fmt.Sprintf("bad-%d", i), ann)
			p.Labels = tc.labels
			p.OwnerReferences = tc.owners
			_, err := createPod(ctx, p)
			if err == nil {
				t.Fatalf("pod admitted; want it denied with %q", tc.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("error is %v (reason %s); want 422 Invalid", err, apierrors.ReasonForError(err))
			}
			msg := err.Error()
			if !strings.Contains(msg, `admission webhook "pods.nicpool.io" denied the request`) {
				t.Errorf("not denied by nicpool's pod webhook: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
			// The same pod under dry-run is denied alike.
			dry := newPod("catalogue", fmt.Sprintf("bad-dry-%d", i), ann)
			dry.OwnerReferences = tc.owners
			if _, err := createPod(ctx, dry, dryRun); err == nil || (len(tc.labels) == 0 && !strings.Contains(err.Error(), tc.want[len(tc.want)-1])) {
				t.Errorf("dry-run: %v", err)
			}
		})
	}
}
