package migrate

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/block"
)

// Record is one record of spiderpool's status.allocatedIPs string. Releases before
// v0.9 wrote no interface.
type Record struct {
	Pod       string `json:"pod"`
	PodUID    string `json:"podUid"`
	Interface string `json:"interface,omitempty"`
}

// Pool is a SpiderIPPool as the cluster stores it.
type Pool struct {
	// Object is the pool without spiderpool's string status.
	Object *v2beta1.SpiderIPPool
	// Records are the records of spiderpool's string; nil when the pool has none left
	// in that form (never allocated from, or already migrated).
	Records map[string]Record
	// Unreadable says why the string could not be decoded.
	Unreadable string
}

// Inputs is what Decide decides on: every pool, endpoint and pod of the cluster, and
// the reserved addresses; and what admission reads to resolve the pods' pool
// selections: the namespaces and the NetworkAttachmentDefinitions.
type Inputs struct {
	Pools      []Pool
	Endpoints  []v2beta1.SpiderEndpoint
	Pods       []corev1.Pod
	Reserved   *netipx.IPSet
	Namespaces []corev1.Namespace
	Networks   []nadv1.NetworkAttachmentDefinition
}

// Outcomes of a record.
const (
	// Migrate: the record is written in nicpool's form, on Entry.Interface.
	Migrate = "migrate"
	// Drop: the record is left out and its address becomes free; its pod is gone or
	// finished, so nothing uses the address.
	Drop = "drop"
	// Unplaced: the record cannot be written (its interface is unknown, or it
	// contradicts another) and its pod still runs. It blocks --apply, unless
	// --drop-unplaced frees such addresses.
	Unplaced = "unplaced"
)

// How a record's interface was found.
const (
	FromEndpoint      = "endpoint"
	FromRecord        = "record"
	FromOnlyInterface = "only interface"
)

// Entry is the fate of one record.
type Entry struct {
	Address   string `json:"address"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUID"`
	Interface string `json:"interface,omitempty"`
	// Node is the node of the pod (of its SpiderEndpoint when the pod is not running):
	// the migrated record goes into a block of that node, where its ipamd looks.
	Node string `json:"node,omitempty"`
	// Source says how the interface was found: FromEndpoint, FromRecord or
	// FromOnlyInterface.
	Source  string `json:"source,omitempty"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// States of a pool.
const (
	// PoolPending: the pool has records in spiderpool's form to migrate.
	PoolPending = "pending"
	// PoolDone: nothing of the pool is left in spiderpool's form.
	PoolDone = "done"
	// PoolBlocked: the pool cannot be migrated as it is; its Error or its unplaced
	// records say why.
	PoolBlocked = "blocked"
)

// PoolPlan is what happens to one pool.
type PoolPlan struct {
	Name    string  `json:"name"`
	State   string  `json:"state"`
	Entries []Entry `json:"entries,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Count returns how many entries have an outcome.
func (p PoolPlan) Count(outcome string) int {
	n := 0
	for _, e := range p.Entries {
		if e.Outcome == outcome {
			n++
		}
	}
	return n
}

// PlacedByBlock groups the records to migrate, in nicpool's form, by the block of the
// pool they go into, with the node the block is for: the node of most of its records'
// pods (the first by name on a tie), so that each node's ipamd finds its pods' records
// among its own blocks; a record of a pod on another node is found through its
// SpiderEndpoint.
func (p PoolPlan) PlacedByBlock(subnet netip.Prefix) map[netip.Prefix]Placement {
	out := map[netip.Prefix]Placement{}
	votes := map[netip.Prefix]map[string]int{}
	for _, e := range p.Entries {
		a, err := netip.ParseAddr(e.Address)
		if e.Outcome != Migrate || err != nil || !subnet.Contains(a) {
			continue
		}
		blk := block.Of(subnet, a)
		pl := out[blk]
		if pl.Records == nil {
			pl.Records, votes[blk] = v2beta1.PoolIPAllocations{}, map[string]int{}
		}
		pl.Records[e.Address] = v2beta1.PoolIPAllocation{Pod: e.Pod, PodUID: e.PodUID, Interface: e.Interface}
		votes[blk][e.Node]++
		out[blk] = pl
	}
	for blk, pl := range out {
		best := -1
		for node, n := range votes[blk] {
			if n > best || (n == best && node < pl.Node) {
				pl.Node, best = node, n
			}
		}
		out[blk] = pl
	}
	return out
}

// Placement is what the migration writes into one block.
type Placement struct {
	Node    string
	Records v2beta1.PoolIPAllocations
}

// Problem is something that stops the migration, or that an operator should know,
// with the command that deals with it when there is one.
type Problem struct {
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Plan is the whole migration.
type Plan struct {
	Pools []PoolPlan `json:"pools"`
	// Pods are the running pods whose annotations are written as nicpool's pod webhook
	// would have written them.
	Pods []PodChange `json:"pods,omitempty"`
	// Blockers stop --apply: nothing is written while there is one.
	Blockers []Problem `json:"blockers,omitempty"`
	// Warnings do not stop it.
	Warnings []Problem `json:"warnings,omitempty"`
	// Switches are spiderpool-conf's IPAM switches, which nicpool must be installed
	// with and with which the pods' annotations are decided.
	Switches Switches `json:"switches"`

	// admitter decides the pods' annotations again when Apply writes them.
	admitter *admitter
}

// Options change what Decide allows.
type Options struct {
	// DropUnplaced frees the addresses of records that cannot be placed instead of
	// refusing: for leaked records of running pods that their endpoint does not list.
	DropUnplaced bool
	// Switches are spiderpool's IPAM switches as given to the migration (its
	// --enable-* flags), for when spiderpool-conf is gone; SwitchesGiven says one was
	// set explicitly, and must then agree with spiderpool-conf when it is there.
	Switches      ipamconf.Switches
	SwitchesGiven bool
}

// Decide places every record of spiderpool's form. It writes nothing.
func Decide(in Inputs, opts Options) Plan {
	ix := newIndex(in)
	var plan Plan
	for _, p := range in.Pools {
		pp := PoolPlan{Name: p.Object.Name, State: PoolPending}
		switch {
		case p.Unreadable != "":
			pp.State, pp.Error = PoolBlocked, p.Unreadable
		case p.Records == nil:
			pp.State = PoolDone
		}
		if pp.State == PoolPending {
			if _, err := allocator.NewRange(p.Object, in.Reserved); err != nil {
				pp.State, pp.Error = PoolBlocked, "nicpool cannot use this pool's spec: "+strings.TrimPrefix(err.Error(), "pool "+pp.Name+": ")
			}
		}
		if pp.State == PoolPending {
			pp.Entries = ix.place(p)
			for i := range pp.Entries {
				if e := &pp.Entries[i]; e.Outcome == Unplaced && opts.DropUnplaced {
					e.Outcome, e.Reason = Drop, e.Reason+"; dropped by --drop-unplaced"
				}
			}
			if pp.Count(Unplaced) > 0 {
				pp.State = PoolBlocked
			}
		}
		if pp.State == PoolBlocked {
			msg := fmt.Sprintf("pool %s: %s", pp.Name, pp.Error)
			if pp.Error == "" {
				msg = fmt.Sprintf("pool %s: %d records cannot be placed on an interface (listed above)", pp.Name, pp.Count(Unplaced))
			}
			plan.Blockers = append(plan.Blockers, Problem{Message: msg, Fix: fixOf(pp)})
		}
		plan.Pools = append(plan.Pools, pp)
	}
	sort.Slice(plan.Pools, func(i, j int) bool { return plan.Pools[i].Name < plan.Pools[j].Name })
	sort.Slice(plan.Blockers, func(i, j int) bool { return plan.Blockers[i].Message < plan.Blockers[j].Message })
	plan.Warnings = append(plan.Warnings, ix.warnings()...)
	return plan
}

func fixOf(pp PoolPlan) string {
	if pp.Error != "" {
		return "kubectl edit spiderippool " + pp.Name
	}
	return "delete the pods named above while spiderpool still runs (it releases their records), or free these addresses with --drop-unplaced"
}

type index struct {
	podByUID  map[string]*corev1.Pod
	endpoints map[string]*v2beta1.SpiderEndpoint // "namespace/name"
	// foreign notes endpoints whose pod UID differs from a record of their name.
	foreign map[string]string
}

func newIndex(in Inputs) *index {
	ix := &index{podByUID: map[string]*corev1.Pod{}, endpoints: map[string]*v2beta1.SpiderEndpoint{}, foreign: map[string]string{}}
	for i := range in.Pods {
		ix.podByUID[string(in.Pods[i].UID)] = &in.Pods[i]
	}
	for i := range in.Endpoints {
		ep := &in.Endpoints[i]
		ix.endpoints[ep.Namespace+"/"+ep.Name] = ep
	}
	return ix
}

// place decides every record of one pool.
func (ix *index) place(p Pool) []Entry {
	subnet, _ := netip.ParsePrefix(p.Object.Spec.Subnet)
	var out []Entry
	for key, rec := range p.Records {
		out = append(out, ix.placeOne(p.Object.Name, subnet, key, rec))
	}
	sort.Slice(out, func(i, j int) bool {
		a, ea := netip.ParseAddr(out[i].Address)
		b, eb := netip.ParseAddr(out[j].Address)
		if (ea == nil) != (eb == nil) {
			return ea == nil // what is not an address goes last
		}
		if a != b {
			return a.Less(b)
		}
		return out[i].Address < out[j].Address
	})
	ix.oneAddressPerFamily(out)
	return out
}

// placeOne finds the interface of one record and decides its outcome.
func (ix *index) placeOne(pool string, subnet netip.Prefix, key string, rec Record) Entry {
	e := Entry{Address: key, Pod: rec.Pod, PodUID: rec.PodUID}
	addr, err := netip.ParseAddr(key)
	switch {
	case err != nil:
		return ix.unknown(e, fmt.Sprintf("%q is not an address", key))
	case !subnet.Contains(addr):
		return ix.unknown(e, fmt.Sprintf("%s is outside the pool's subnet %s", addr, subnet))
	case addr.String() != key:
		e.Address = addr.String()
	}
	if _, _, ok := strings.Cut(rec.Pod, "/"); !ok || rec.PodUID == "" {
		return ix.unknown(e, "the record does not name its pod as namespace/name with a UID")
	}
	pod := ix.podByUID[rec.PodUID]
	ep := ix.endpoints[rec.Pod]
	own := ep != nil && ep.Status.Current.UID == rec.PodUID
	if ep != nil && !own {
		ix.foreign[rec.Pod] = fmt.Sprintf("SpiderEndpoint %s belongs to pod UID %s, but pool %s records %s for pod UID %s", rec.Pod, ep.Status.Current.UID, pool, addr, rec.PodUID)
	}
	listed := ""
	if ep != nil {
		listed = listing(ep, pool, addr)
	}
	switch {
	case listed != "" && rec.Interface != "" && rec.Interface != listed:
		return ix.held(e, pod, fmt.Sprintf("the pool record says interface %s, SpiderEndpoint %s says %s", rec.Interface, rec.Pod, listed))
	case listed != "":
		e.Interface, e.Source = listed, FromEndpoint
	case rec.Interface != "":
		e.Interface, e.Source = rec.Interface, FromRecord
	case pod != nil && onlyInterface(pod) != "":
		e.Interface, e.Source = onlyInterface(pod), FromOnlyInterface
	default:
		return ix.held(e, pod, "no SpiderEndpoint lists it and the pool record names no interface")
	}
	if own {
		if other := otherAddress(ep, e.Interface, addr); other != "" {
			iface := e.Interface
			e.Interface, e.Source = "", ""
			return ix.held(e, pod, fmt.Sprintf("leaked: SpiderEndpoint %s gives %s to interface %s", rec.Pod, other, iface))
		}
	}
	e.Outcome = Migrate
	switch {
	case pod != nil && pod.Spec.NodeName != "":
		e.Node = pod.Spec.NodeName
	case own:
		e.Node = ep.Status.Current.Node
	}
	return e
}

// unknown decides a record whose holder cannot be judged.
func (ix *index) unknown(e Entry, reason string) Entry {
	e.Outcome, e.Reason = Unplaced, reason
	return e
}

// held decides a record that cannot be placed by what became of its pod: a pod that
// is gone or finished uses nothing, so the record is dropped; a running one may use
// the address, so the record blocks.
func (ix *index) held(e Entry, pod *corev1.Pod, reason string) Entry {
	e.Reason = reason
	switch {
	case pod == nil:
		e.Outcome, e.Reason = Drop, reason+"; pod UID "+e.PodUID+" is gone"
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		e.Outcome, e.Reason = Drop, reason+"; the pod has "+strings.ToLower(string(pod.Status.Phase))
	default:
		e.Outcome = Unplaced
	}
	return e
}

// oneAddressPerFamily keeps nicpool's rule that one pod interface holds at most one
// address per family in a pool: when records would give an interface several, the one
// its endpoint lists stays and the others are leaks.
func (ix *index) oneAddressPerFamily(entries []Entry) {
	type key struct {
		uid, iface string
		v4         bool
	}
	groups := map[key][]int{}
	for i, e := range entries {
		if e.Outcome != Migrate {
			continue
		}
		a, _ := netip.ParseAddr(e.Address)
		k := key{e.PodUID, e.Interface, a.Is4()}
		groups[k] = append(groups[k], i)
	}
	for _, idx := range groups {
		if len(idx) < 2 {
			continue
		}
		keep := -1
		for _, i := range idx {
			if entries[i].Source == FromEndpoint {
				keep = i
			}
		}
		var addrs []string
		for _, i := range idx {
			addrs = append(addrs, entries[i].Address)
		}
		for _, i := range idx {
			if i == keep {
				continue
			}
			e := &entries[i]
			reason := fmt.Sprintf("pod UID %s interface %s would hold %s in one pool", e.PodUID, e.Interface, strings.Join(addrs, ", "))
			if keep >= 0 {
				reason = fmt.Sprintf("leaked: its endpoint gives %s to interface %s", entries[keep].Address, e.Interface)
			}
			e.Interface, e.Source = "", ""
			*e = ix.held(*e, ix.podByUID[e.PodUID], reason)
		}
	}
}

func (ix *index) warnings() []Problem {
	var out []Problem
	for _, msg := range ix.foreign {
		out = append(out, Problem{Message: msg + "; kubectl nicpool check will report it after the migration"})
	}
	for name, ep := range ix.endpoints {
		for _, d := range ep.Status.Current.IPs {
			if d.Interface == "" {
				out = append(out, Problem{
					Message: fmt.Sprintf("SpiderEndpoint %s records an address under an empty interface (spiderpool's bug): nicpool cannot update it", name),
					Fix:     fmt.Sprintf("after the migration: kubectl delete pod -n %s %s", ep.Namespace, ep.Name),
				})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Message < out[j].Message })
	return out
}

// listing returns the interface under which an endpoint lists addr of pool; empty
// when it does not, or lists it under an empty interface.
func listing(ep *v2beta1.SpiderEndpoint, pool string, addr netip.Addr) string {
	for _, d := range ep.Status.Current.IPs {
		for _, f := range []struct{ addr, pool *string }{{d.IPv4, d.IPv4Pool}, {d.IPv6, d.IPv6Pool}} {
			if a, ok := parse(f.addr); ok && a == addr && (f.pool == nil || *f.pool == pool) {
				return d.Interface
			}
		}
	}
	return ""
}

// otherAddress returns the address of addr's family that the endpoint lists on iface,
// when it is not addr.
func otherAddress(ep *v2beta1.SpiderEndpoint, iface string, addr netip.Addr) string {
	for _, d := range ep.Status.Current.IPs {
		if d.Interface != iface {
			continue
		}
		s := d.IPv6
		if addr.Is4() {
			s = d.IPv4
		}
		if a, ok := parse(s); ok && a != addr {
			return a.String()
		}
	}
	return ""
}

// onlyInterface returns the pod's interface when it has exactly one (no secondary
// networks): then every address of the pod is on it.
func onlyInterface(pod *corev1.Pod) string {
	ifs, errs := annotations.PodInterfaces(pod.Annotations, pod.Namespace)
	if len(errs) > 0 || len(ifs) != 1 {
		return ""
	}
	return ifs[0].Name
}

// parse reads an endpoint address, written in CIDR form.
func parse(s *string) (netip.Addr, bool) {
	if s == nil {
		return netip.Addr{}, false
	}
	if p, err := netip.ParsePrefix(*s); err == nil {
		return p.Addr(), true
	}
	a, err := netip.ParseAddr(*s)
	return a, err == nil
}
