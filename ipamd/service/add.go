package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/ipamd/metrics"
	"github.com/nicpool/nicpool/ipamd/selection"
)

// maxDecisions bounds how often one request re-decides after its endpoint changed
// under it (another writer, a deleted and recreated endpoint).
const maxDecisions = 8

// Allocate serves CNI ADD for one (pod UID, interface). A retry returns the addresses
// the interface already holds; a failure leaves nothing newly allocated behind.
func (s *Service) Allocate(ctx context.Context, req *api.AllocateRequest) (resp *api.AllocateResponse, err error) {
	start, outcome := time.Now(), metrics.OutcomeError
	defer func() {
		if err != nil && outcome == metrics.OutcomeError {
			outcome = metrics.FailureOutcome(err)
		}
		metrics.Allocations.WithLabelValues(outcome).Inc()
		metrics.AllocationDuration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}()

	// The request names an interface of a pod; the pod's requests take turns.
	if err := checkAdd(req); err != nil {
		return nil, err
	}
	t, err := s.begin(ctx, req.Pod.Namespace+"/"+req.Pod.Name)
	if err != nil {
		outcome = metrics.OutcomeBusy
		return nil, err
	}
	defer t.done()
	ctx = t.ctx
	pod, err := s.requestPod(ctx, req.Pod)
	if err != nil {
		return nil, err
	}

	// The pools the interface draws from.
	pools, err := s.pools(ctx)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "list pools", err)
	}
	ns := s.namespace(ctx, pod.Namespace)
	choice, err := s.choose(pod, ns, req, pools)
	if err != nil {
		outcome = metrics.OutcomeNoPool
		return nil, err
	}

	// One address per family, recorded in the pod's SpiderEndpoint.
	got, how, err := s.allocateAndRecord(ctx, pod, ns, req, choice, pools)
	if err != nil {
		return nil, err
	}
	outcome = how
	return s.response(pod, req.Interface, choice, got), nil
}

// checkAdd refuses an ADD that names no interface or no pod.
func checkAdd(req *api.AllocateRequest) error {
	if req.Interface == "" {
		return cniError(api.CodeInvalidConfig, "CNI_IFNAME is empty: the runtime must name the interface", nil)
	}
	if req.Pod.Namespace == "" || req.Pod.Name == "" {
		return cniError(api.CodeInvalidConfig, "K8S_POD_NAMESPACE and K8S_POD_NAME are required in CNI_ARGS", nil)
	}
	return checkNetwork(req.Network)
}

// requestPod is the pod an ADD names, of the UID it names; try again later while the
// API server does not know it.
func (s *Service) requestPod(ctx context.Context, ref api.Pod) (*corev1.Pod, error) {
	pod, err := s.pod(ctx, ref)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "read pod "+ref.Namespace+"/"+ref.Name, err)
	}
	if pod == nil || (ref.UID != "" && string(pod.UID) != ref.UID) {
		return nil, cniError(api.CodeTryAgainLater, fmt.Sprintf("pod %s/%s with UID %q is not (yet) known to the API server", ref.Namespace, ref.Name, ref.UID), nil)
	}
	return pod, nil
}

// choose is the pools of each family the interface draws from; an Event on the pod
// says why there are none.
func (s *Service) choose(pod *corev1.Pod, ns *corev1.Namespace, req *api.AllocateRequest, pools []v2beta1.SpiderIPPool) (selection.Choice, error) {
	choice, left, err := s.chooseEnabled(pod, ns, req.Interface, req.Network, pools)
	if err != nil {
		s.event(pod, "InvalidPoolSelection", err.Error())
		return choice, cniError(api.CodeInvalidConfig, "pool selection of interface "+req.Interface, err)
	}
	if len(choice.Families()) == 0 {
		msg := fmt.Sprintf("no pool for interface %s: name pools in %s, the namespace annotations %s/%s, the CNI network's default pools, or mark a pool spec.default: true",
			req.Interface, annotations.IPPools, annotations.NamespaceDefaultIPv4Pool, annotations.NamespaceDefaultIPv6Pool)
		if !left.Empty() {
			msg = fmt.Sprintf("no pool of an enabled IP family for interface %s: its pools %v are left out because %s",
				req.Interface, left.Pools(), left.Why())
		}
		s.event(pod, "NoPool", msg)
		return choice, cniError(api.CodeNoPool, msg, nil)
	}
	return choice, nil
}

// chooseEnabled is selection.Choose with the pools of a disabled IP family left out
// (ipamconf's LeaveOut, the webhook's rule too): every choice ipamd acts on goes
// through it.
func (s *Service) chooseEnabled(pod *corev1.Pod, ns *corev1.Namespace, iface string, network api.NetworkConfig, pools []v2beta1.SpiderIPPool) (selection.Choice, ipamconf.Left, error) {
	choice, err := selection.Choose(pod, ns, iface, network, pools)
	if err != nil {
		return choice, ipamconf.Left{}, err
	}
	var left ipamconf.Left
	choice.IPv4, choice.IPv6, left = s.Switches.LeaveOut(choice.IPv4, choice.IPv6)
	return choice, left, nil
}

// allocateAndRecord takes one address per family the choice asks for (keeping what
// the interface holds) and records them in the pod's endpoint, deciding again when
// the endpoint changed meanwhile. On failure it gives back every address it took.
// outcome says how the addresses were found.
func (s *Service) allocateAndRecord(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace, req *api.AllocateRequest, choice selection.Choice, pools []v2beta1.SpiderIPPool) (got []held, outcome string, err error) {
	log := s.Log.WithValues("pod", client.ObjectKeyFromObject(pod).String(), "podUID", pod.UID, "interface", req.Interface)
	owner := allocator.Owner{Pod: pod.Namespace + "/" + pod.Name, PodUID: string(pod.UID), Interface: req.Interface}
	// taken is what this request allocated, over every round: a failure gives it back.
	var taken []held
	for range maxDecisions {
		ep, tookOver, err := s.adopt(ctx, pod, req.Interface, req.Network, pools)
		if errors.Is(err, errEndpointReserved) {
			log.Info("refused: the pod's name holds a returning StatefulSet pod's endpoint", "error", err.Error())
			s.event(pod, "EndpointReserved", err.Error())
			return nil, "", cniError(api.CodeInvalidConfig, "SpiderEndpoint "+pod.Namespace+"/"+pod.Name, err)
		}
		if err != nil {
			return nil, "", cniError(api.CodeTryAgainLater, "take over or clean the pod's SpiderEndpoint", err)
		}
		phase := time.Now()
		got, fresh, stale, aerr := s.take(ctx, pod, ns, ep, owner, choice, req.Network)
		taken = append(taken, fresh...)
		metrics.AllocationPhase.WithLabelValues("pools").Observe(time.Since(phase).Seconds())
		if aerr != nil {
			s.undo(ctx, owner, taken)
			log.Info("allocation failed", "error", aerr.Error())
			s.event(pod, "AllocationFailed", fmt.Sprintf("interface %s: %s", req.Interface, aerr.Error()))
			return nil, "", aerr
		}
		detail := s.detail(pod, req.Interface, choice, got)
		phase = time.Now()
		err = s.record(ctx, pod, ep, detail, endpoint.Attachment{ContainerID: req.ContainerID, Network: req.Network.Name})
		metrics.AllocationPhase.WithLabelValues("endpoint").Observe(time.Since(phase).Seconds())
		if errors.Is(err, errEndpointMoved) {
			continue // pool records are ours by owner: the next round finds and keeps them
		}
		if err != nil {
			s.undo(ctx, owner, taken)
			s.event(pod, "AllocationFailed", fmt.Sprintf("interface %s: record SpiderEndpoint: %v", req.Interface, err))
			return nil, "", cniError(api.CodeTryAgainLater, "record the allocation in SpiderEndpoint "+pod.Namespace+"/"+pod.Name, err)
		}
		// Only once the endpoint names the interface's addresses of its pools: until
		// then it may still name these, which must not be handed out meanwhile.
		if released, err := s.release(ctx, owner, stale); err != nil {
			// What is recorded stays (a retry finds it); the retry releases the rest.
			return nil, "", cniError(api.CodeTryAgainLater, "release what interface "+req.Interface+" holds from pools it no longer draws from", err)
		} else if len(released) > 0 {
			log.Info("released addresses of pools the interface no longer draws from", "released", released, "source", choice.Source)
		}
		switch {
		case tookOver:
			outcome = metrics.OutcomeTakenOver
		case len(taken) == 0:
			outcome = metrics.OutcomeExisting
		default:
			outcome = metrics.OutcomeAllocated
		}
		for _, h := range got {
			log.Info("allocated", "pool", h.pool.Name, "address", h.addr.String(), "outcome", outcome)
		}
		return got, outcome, nil
	}
	s.undo(ctx, owner, taken)
	return nil, "", cniError(api.CodeTryAgainLater, fmt.Sprintf("SpiderEndpoint %s/%s kept changing during %d attempts", pod.Namespace, pod.Name, maxDecisions), nil)
}

// take returns one address per family the choice asks for: the one the owner holds,
// else a new one from the first pool that can give it. fresh lists the new ones.
//
// A StatefulSet pod's addresses outlive its pod UIDs (takeOver, which at another
// interface's ADD cannot see this interface's CNI network and keeps its addresses), so
// its interface keeps only what it holds from a pool the choice allows
// (Choice.Allows), as spiderpool does at each ADD of a StatefulSet pod: stale lists the
// rest, for the caller to release once the endpoint no longer names them. Any other
// pod keeps what its pod UID holds, whatever its pools became since.
func (s *Service) take(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace, ep *v2beta1.SpiderEndpoint, owner allocator.Owner, choice selection.Choice, network api.NetworkConfig) (got, fresh, stale []held, aerr *api.Error) {
	all, err := s.heldBy(ctx, owner, ep, append(append([]string(nil), choice.IPv4...), choice.IPv6...)...)
	if err != nil {
		return nil, nil, nil, cniError(api.CodeTryAgainLater, "read what the interface holds", err)
	}
	_, sticky := workload.StatefulSetOf(pod.OwnerReferences)
	sticky = sticky && s.Switches.StatefulSets()
	var current []held
	for _, h := range all {
		if !sticky || choice.Allows(ipranges.Family(h.addr), h.pool.Name) {
			current = append(current, h)
		} else {
			stale = append(stale, h)
		}
	}
	target := eligibility.Subject{
		Namespace:       pod.Namespace,
		NamespaceLabels: func() (labels.Set, bool, error) { return namespaceLabels(ns) },
		Pod:             true,
		PodLabels:       pod.Labels,
		Node:            s.Node,
		NodeLabels:      nodeLabels(s.node(ctx)),
		Interface:       owner.Interface,
		Network:         s.Multus.Network(pod.Annotations, pod.Namespace, owner.Interface),
		Multus:          &s.Multus,
	}
	for _, fam := range choice.Families() {
		if h, ok := pick(current, fam); ok {
			got = append(got, h)
			continue
		}
		h, err := s.allocate(ctx, owner, fam, choice.Pools(fam), target)
		if err != nil {
			return got, fresh, stale, err
		}
		got, fresh = append(got, h), append(fresh, h)
	}
	return got, fresh, stale, nil
}

// pick returns the lowest address of one family among what an owner holds (of pools
// the choice allows).
func pick(hs []held, fam int64) (held, bool) {
	var best held
	for _, h := range hs {
		if ipranges.Family(h.addr) == fam && (!best.addr.IsValid() || h.addr.Less(best.addr)) {
			best = h
		}
	}
	return best, best.addr.IsValid()
}

// allocate tries the pools in the choice's order and returns the first address given.
func (s *Service) allocate(ctx context.Context, owner allocator.Owner, fam int64, names []string, target eligibility.Subject) (held, *api.Error) {
	var skipped, exhausted []string
	for _, name := range names {
		p, err := s.pool(ctx, name)
		if err != nil {
			return held{}, cniError(api.CodeTryAgainLater, "read pool "+name, err)
		}
		if p == nil {
			skipped = append(skipped, fmt.Sprintf("pool %s does not exist", name))
			continue
		}
		if f := ipranges.PoolFamily(&p.Spec); f != fam {
			skipped = append(skipped, fmt.Sprintf("pool %s is IPv%d, listed for IPv%d", name, f, fam))
			continue
		}
		if why, err := eligibility.NewPool(p).Excludes(target); why != "" || err != nil {
			skipped = append(skipped, fmt.Sprintf("pool %s %s", name, why))
			continue
		}
		if _, err := networkOf(p); err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		got, err := s.Ledger.Allocate(ctx, name, owner)
		switch {
		case errors.Is(err, allocator.ErrExhausted):
			exhausted = append(exhausted, err.Error())
			continue
		case errors.Is(err, eligibility.ErrTerminating) || errors.Is(err, eligibility.ErrDisabled) || apierrors.IsNotFound(err):
			skipped = append(skipped, err.Error())
			continue
		case err != nil:
			return held{}, cniError(api.CodeTryAgainLater, "allocate from pool "+name, err)
		}
		return held{pool: p, addr: got.Addr}, nil
	}
	all := strings.Join(append(exhausted, skipped...), "; ")
	if len(exhausted) > 0 {
		return held{}, cniError(api.CodePoolExhausted, fmt.Sprintf("no free IPv%d address for interface %s in pools %v", fam, owner.Interface, names), errors.New(all))
	}
	return held{}, cniError(api.CodeNoPool, fmt.Sprintf("no usable IPv%d pool for interface %s among %v", fam, owner.Interface, names), errors.New(all))
}

// undo releases what a failed ADD took, so that it leaves nothing behind (I7).
func (s *Service) undo(ctx context.Context, owner allocator.Owner, fresh []held) {
	for _, h := range fresh {
		// A fresh context: the request's may be what ended.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if _, err := s.Ledger.Release(uctx, h.pool.Name, owner, h.addr); err != nil {
			s.Log.Error(err, "release after a failed ADD; the next DEL or GC releases it", "pool", h.pool.Name, "address", h.addr.String())
		}
		cancel()
	}
}

// namespaceLabels are a namespace's labels; a namespace ipamd does not know admits
// no pool that restricts namespaces by label.
func namespaceLabels(ns *corev1.Namespace) (labels.Set, bool, error) {
	if ns == nil {
		return nil, false, nil
	}
	return ns.Labels, true, nil
}

func nodeLabels(n *corev1.Node) labels.Set {
	if n == nil {
		return nil
	}
	return n.Labels
}

// detail is the endpoint record of one interface.
func (s *Service) detail(pod *corev1.Pod, iface string, choice selection.Choice, got []held) v2beta1.IPAllocationDetail {
	d := v2beta1.IPAllocationDetail{Interface: iface}
	clean := choice.CleanGateway
	d.CleanGateway = &clean
	for _, h := range got {
		subnet, _ := netip.ParsePrefix(h.pool.Spec.Subnet)
		cidr := ipranges.CIDR(h.addr, subnet)
		pool := h.pool.Name
		network, _ := networkOf(h.pool)
		var gw *string
		if g := gatewayString(network); g != "" {
			gw = &g
		}
		if h.addr.Is4() {
			d.IPv4, d.IPv4Pool, d.IPv4Gateway = &cidr, &pool, gw
		} else {
			d.IPv6, d.IPv6Pool, d.IPv6Gateway = &cidr, &pool, gw
		}
		if d.Vlan == nil && h.pool.Spec.Vlan != nil {
			v := *h.pool.Spec.Vlan
			d.Vlan = &v
		}
		d.Routes = append(d.Routes, routesFor(pod, network, subnet)...)
	}
	return d
}

// routesFor is the routes of an interface addressed from subnet: the pool's, then the
// pod annotation's whose gateway lies in subnet.
func routesFor(pod *corev1.Pod, network poolNetwork, subnet netip.Prefix) []v2beta1.Route {
	routes := append([]v2beta1.Route(nil), network.Routes...)
	if v, ok := pod.Annotations[annotations.Routes]; ok {
		if rs, errs := annotations.ParseRoutes(v); len(errs) == 0 {
			routes = append(routes, annotations.RoutesFor(rs, subnet)...)
		}
	}
	return routes
}

func (s *Service) response(pod *corev1.Pod, iface string, choice selection.Choice, got []held) *api.AllocateResponse {
	resp := &api.AllocateResponse{Interface: iface, CleanGateway: choice.CleanGateway}
	for _, h := range got {
		subnet, _ := netip.ParsePrefix(h.pool.Spec.Subnet)
		network, _ := networkOf(h.pool)
		c := api.IPConfig{Address: ipranges.CIDR(h.addr, subnet), Pool: h.pool.Name}
		if !choice.CleanGateway {
			c.Gateway = gatewayString(network)
		}
		resp.IPs = append(resp.IPs, c)
		for _, r := range routesFor(pod, network, subnet) {
			resp.Routes = append(resp.Routes, api.Route{Dst: r.Dst, Gw: r.Gw})
		}
	}
	return resp
}

// record writes the interface's entry into the pod's endpoint: a create carrying the
// status when there is none (the CRD has no status subresource), else an update
// compare-and-swapped on resourceVersion and UID. errEndpointMoved means decide again.
func (s *Service) record(ctx context.Context, pod *corev1.Pod, ep *v2beta1.SpiderEndpoint, d v2beta1.IPAllocationDetail, att endpoint.Attachment) error {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if ep == nil {
		kind, name := workload.Controller(pod.Name, pod.OwnerReferences)
		ep = &v2beta1.SpiderEndpoint{}
		ep.Namespace, ep.Name = pod.Namespace, pod.Name
		ep.Status = v2beta1.WorkloadEndpointStatus{
			Current:             v2beta1.PodIPAllocation{UID: string(pod.UID), Node: s.Node, IPs: []v2beta1.IPAllocationDetail{d}},
			OwnerControllerType: kind, OwnerControllerName: name,
		}
		endpoint.SetAttachments(ep, map[string]endpoint.Attachment{d.Interface: att})
		err := s.endpoints.Create(ctx, ep)
		if apierrors.IsAlreadyExists(err) {
			_, _ = s.endpoints.Fresh(ctx, key)
			return errEndpointMoved
		}
		return err
	}
	if ep.Status.Current.UID != string(pod.UID) {
		return errEndpointMoved
	}
	upd := ep.DeepCopy()
	replaced := false
	for i := range upd.Status.Current.IPs {
		if upd.Status.Current.IPs[i].Interface == d.Interface {
			upd.Status.Current.IPs[i], replaced = d, true
		}
	}
	if !replaced {
		upd.Status.Current.IPs = append(upd.Status.Current.IPs, d)
	}
	atts := endpoint.Attachments(upd)
	atts[d.Interface] = att
	endpoint.SetAttachments(upd, atts)
	upd.Status.Current.Node = s.Node
	if endpoint.Equal(ep, upd) {
		return nil
	}
	err := s.endpoints.Update(ctx, upd)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		_, _ = s.endpoints.Fresh(ctx, key)
		return errEndpointMoved
	}
	return err
}
