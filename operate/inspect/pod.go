package inspect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// PodReport is what every interface of a pod was given.
type PodReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the pod's; for a pod that is gone, the UID its endpoint records.
	UID    string `json:"uid"`
	Holder Holder `json:"holder"`
	// Endpoint is the SpiderEndpoint's pod UID; empty when the pod has none.
	EndpointUID string            `json:"endpointUID,omitempty"`
	Interfaces  []InterfaceReport `json:"interfaces"`
	// Problems are disagreements that belong to no interface of the pod.
	Problems []string `json:"problems,omitempty"`
	// Unchecked says why the pool records could not be read (a namespace's users read
	// their SpiderEndpoints, not the cluster-scoped IPBlocks): the report is the
	// endpoint's alone and its agreement with the records is not checked.
	Unchecked string `json:"unchecked,omitempty"`
}

// InterfaceReport is one interface of the pod.
type InterfaceReport struct {
	Interface string `json:"interface"`
	// Network is the NetworkAttachmentDefinition ("namespace/name") the interface is
	// attached to; empty for the cluster network (eth0) or an interface the pod's
	// networks annotation does not name.
	Network      string          `json:"network,omitempty"`
	Addresses    []Address       `json:"addresses,omitempty"`
	Routes       []v2beta1.Route `json:"routes,omitempty"`
	CleanGateway bool            `json:"cleanGateway,omitempty"`
	// Agrees is true when the pod's endpoint and the pool records say the same.
	Agrees   bool     `json:"agrees"`
	Problems []string `json:"problems,omitempty"`
}

// Address is one address of an interface.
type Address struct {
	Family int64 `json:"family"`
	// Address is in CIDR form as the endpoint records it, else as recorded in the pool.
	Address string `json:"address"`
	Pool    string `json:"pool"`
	Gateway string `json:"gateway,omitempty"`
	// Block is the IPBlock that records the address.
	Block string `json:"block,omitempty"`
}

// Pod reports every interface of pod namespace/name: from its SpiderEndpoint and the
// pool records of its pod name, and whether they agree. A pod that is gone is reported
// from what is left of it; NotFound only when nothing is.
func Pod(ctx context.Context, r client.Reader, namespace, name string, now time.Time) (*PodReport, error) {
	key := namespace + "/" + name
	pod := &corev1.Pod{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return nil, fmt.Errorf("read pod %s: %w", key, err)
	}
	ep, err := endpointOf(ctx, r, key)
	if err != nil {
		return nil, err
	}
	idx, err := readRecords(ctx, r)
	if err != nil {
		return nil, err
	}
	rep := podReport(namespace, name, pod, ep, idx, now)
	if rep == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	return rep, nil
}

// Pods reports each of pods as Pod does, reading the records once and the endpoints
// of namespace ("" for every namespace) once.
func Pods(ctx context.Context, r client.Reader, namespace string, pods []corev1.Pod, now time.Time) ([]PodReport, error) {
	var eps v2beta1.SpiderEndpointList
	if err := r.List(ctx, &eps, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list SpiderEndpoints: %w", err)
	}
	byName := map[string]*v2beta1.SpiderEndpoint{}
	for i := range eps.Items {
		byName[eps.Items[i].Namespace+"/"+eps.Items[i].Name] = &eps.Items[i]
	}
	idx, err := readRecords(ctx, r)
	if err != nil {
		return nil, err
	}
	out := make([]PodReport, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		if rep := podReport(p.Namespace, p.Name, p, byName[p.Namespace+"/"+p.Name], idx, now); rep != nil {
			out = append(out, *rep)
		}
	}
	return out, nil
}

// records indexes every record by its pod's name and by pool and address.
type records struct {
	byPod  map[string][]ledger.Record
	byAddr map[string]ledger.Record
	// unread, when set, says why the records could not be read: there are none to
	// compare with.
	unread string
}

// readRecords reads every pool record. Records the reader may not list (a namespace's
// user without rights on the cluster-scoped IPBlocks and pools) are unread, not an
// error: the pod is then reported from its endpoint alone.
func readRecords(ctx context.Context, r client.Reader) (records, error) {
	all, _, err := ledger.List(ctx, r)
	if apierrors.IsForbidden(err) {
		idx := indexRecords(nil)
		idx.unread = "the pool records (IPBlocks and SpiderIPPools, cluster-scoped) are not readable with these credentials, so the addresses are the SpiderEndpoint's and their agreement with the records is not checked; a user who may read them (the view role bound cluster-wide) sees both: " + err.Error()
		return idx, nil
	}
	if err != nil {
		return records{}, err
	}
	return indexRecords(all), nil
}

func indexRecords(all []ledger.Record) records {
	idx := records{byPod: map[string][]ledger.Record{}, byAddr: map[string]ledger.Record{}}
	for _, rec := range all {
		idx.byPod[rec.Holder.Pod] = append(idx.byPod[rec.Holder.Pod], rec)
		idx.byAddr[rec.Pool+"/"+rec.Addr.String()] = rec
	}
	return idx
}

// podReport reports pod namespace/name from the pod (nil when gone), its endpoint (nil
// when none) and the records; nil when there is nothing of it.
func podReport(namespace, name string, pod *corev1.Pod, ep *v2beta1.SpiderEndpoint, idx records, now time.Time) *PodReport {
	key := namespace + "/" + name
	recs := idx.byPod[key]
	rep := &PodReport{Namespace: namespace, Name: name}
	switch {
	case pod != nil:
		rep.UID, rep.Holder = string(pod.UID), describe(pod, now)
	case ep != nil:
		rep.UID, rep.Holder = ep.Status.Current.UID, Holder{State: StateGone, Detail: "no pod " + key, Node: ep.Status.Current.Node}
	case len(recs) > 0:
		rep.UID, rep.Holder = recs[0].Holder.PodUID, Holder{State: StateGone, Detail: "no pod " + key}
	default:
		return nil
	}
	if ep != nil {
		rep.EndpointUID = ep.Status.Current.UID
		if ep.Status.Current.UID != rep.UID {
			rep.Problems = append(rep.Problems, fmt.Sprintf("SpiderEndpoint %s belongs to pod UID %s, not %s", key, ep.Status.Current.UID, rep.UID))
			ep = nil // it says nothing about this pod
		}
	}
	var mine []ledger.Record
	for _, rec := range recs {
		if rec.Holder.PodUID == rep.UID {
			mine = append(mine, rec)
			continue
		}
		rep.Problems = append(rep.Problems, fmt.Sprintf("pool %s records %s on %s for pod UID %s, not this pod", rec.Pool, rec.Addr, rec.Holder.Interface, rec.Holder.PodUID))
	}
	for _, i := range interfacesOf(pod, ep, mine) {
		ir := interfaceReport(i, ep, mine, idx.byAddr)
		if idx.unread != "" {
			// Every endpoint address would read as unrecorded: nothing was compared.
			ir.Problems, ir.Agrees = nil, false
		}
		rep.Interfaces = append(rep.Interfaces, ir)
	}
	rep.Unchecked = idx.unread
	return rep
}

// interfacesOf lists the pod's interfaces: those its networks annotation gives, in
// order, then any other that its endpoint or records name.
func interfacesOf(pod *corev1.Pod, ep *v2beta1.SpiderEndpoint, recs []ledger.Record) []annotations.Interface {
	var out []annotations.Interface
	if pod != nil {
		ifs, errs := annotations.PodInterfaces(pod.Annotations, pod.Namespace)
		if len(errs) == 0 {
			out = ifs
		}
	}
	var extra []string
	has := func(name string) bool {
		return slices.ContainsFunc(out, func(i annotations.Interface) bool { return i.Name == name }) || slices.Contains(extra, name)
	}
	if ep != nil {
		for _, d := range ep.Status.Current.IPs {
			if !has(d.Interface) {
				extra = append(extra, d.Interface)
			}
		}
	}
	for _, rec := range recs {
		if !has(rec.Holder.Interface) {
			extra = append(extra, rec.Holder.Interface)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		out = append(out, annotations.Interface{Name: name, Position: -1})
	}
	return out
}

func interfaceReport(i annotations.Interface, ep *v2beta1.SpiderEndpoint, mine []ledger.Record, byAddr map[string]ledger.Record) InterfaceReport {
	rep := InterfaceReport{Interface: i.Name, Network: i.Network}
	var d *v2beta1.IPAllocationDetail
	if ep != nil {
		for k := range ep.Status.Current.IPs {
			if ep.Status.Current.IPs[k].Interface == i.Name {
				d = &ep.Status.Current.IPs[k]
			}
		}
	}
	if d != nil {
		rep.Routes = d.Routes
		rep.CleanGateway = d.CleanGateway != nil && *d.CleanGateway
	}
	for _, fam := range []int64{v2beta1.IPv4, v2beta1.IPv6} {
		var held []ledger.Record
		for _, rec := range mine {
			if rec.Holder.Interface == i.Name && ipranges.Family(rec.Addr) == fam {
				held = append(held, rec)
			}
		}
		var cidr, pool, gw *string
		if d != nil && fam == v2beta1.IPv4 {
			cidr, pool, gw = d.IPv4, d.IPv4Pool, d.IPv4Gateway
		} else if d != nil {
			cidr, pool, gw = d.IPv6, d.IPv6Pool, d.IPv6Gateway
		}
		addr, listed := endpointAddr(cidr)
		if listed {
			a := Address{Family: fam, Address: *cidr, Pool: deref(pool), Gateway: deref(gw)}
			rec, ok := byAddr[a.Pool+"/"+addr.String()]
			switch {
			case !ok:
				rep.Problems = append(rep.Problems, fmt.Sprintf("the endpoint records %s in pool %s, which records nothing there", addr, a.Pool))
			case rec.Holder.PodUID != ep.Status.Current.UID || rec.Holder.Interface != i.Name:
				rep.Problems = append(rep.Problems, fmt.Sprintf("the endpoint records %s, which pool %s gives to %s UID %s interface %s", addr, a.Pool, rec.Holder.Pod, rec.Holder.PodUID, rec.Holder.Interface))
			default:
				a.Block = rec.Block
			}
			rep.Addresses = append(rep.Addresses, a)
		}
		for _, rec := range held {
			if listed && rec.Addr == addr && rec.Pool == deref(pool) {
				continue
			}
			rep.Addresses = append(rep.Addresses, Address{Family: fam, Address: rec.Addr.String(), Pool: rec.Pool, Block: rec.Block})
			rep.Problems = append(rep.Problems, fmt.Sprintf("pool %s records %s for this interface; the endpoint does not", rec.Pool, rec.Addr))
		}
	}
	rep.Agrees = len(rep.Problems) == 0
	return rep
}

// Agrees reports whether every interface agrees and nothing else is wrong. An
// unchecked report does not agree; Disagrees tells it from one that disagrees.
func (p *PodReport) Agrees() bool {
	if len(p.Problems) > 0 || p.Unchecked != "" {
		return false
	}
	for _, i := range p.Interfaces {
		if !i.Agrees {
			return false
		}
	}
	return true
}

// Disagrees reports whether the records were read and something disagrees.
func (p *PodReport) Disagrees() bool { return p.Unchecked == "" && !p.Agrees() }
