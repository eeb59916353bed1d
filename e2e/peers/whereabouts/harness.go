package whereabouts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	wbconfig "github.com/k8snetworkplumbingwg/whereabouts/pkg/config"
	wbclient "github.com/k8snetworkplumbingwg/whereabouts/pkg/generated/clientset/versioned"
	"github.com/k8snetworkplumbingwg/whereabouts/pkg/iphelpers"
	wbk8s "github.com/k8snetworkplumbingwg/whereabouts/pkg/storage/kubernetes"
	wbtypes "github.com/k8snetworkplumbingwg/whereabouts/pkg/types"
)

// Options describe one run: Pods ADDs spread over Nodes, all started at once, from
// one range.
type Options struct {
	Pods, Nodes int
	// Namespace holds the pods' names, whereabouts' Lease and its pool.
	Namespace string
	// Range is the CIDR; RangeStart..RangeEnd (inclusive) the allocatable addresses.
	Range, RangeStart, RangeEnd string
	// Attempts is how many times one pod's ADD is run before giving up: a kubelet
	// re-runs a sandbox whose CNI ADD failed, with a new container ID.
	Attempts int
}

// Result is what one run observed.
type Result struct {
	// Wall is from the first ADD's start to the last ADD's end, retries included.
	Wall time.Duration
	// Allocated is pod index → address, for pods whose ADD finally succeeded.
	Allocated map[int]net.IP
	// AttemptLatency is every ADD attempt's duration (sorted); PodLatency is each
	// allocated pod's time from its first attempt to its address (sorted).
	AttemptLatency, PodLatency []time.Duration
	// FirstAttemptFailed counts pods whose first ADD failed; GaveUp pods never got an
	// address; Attempts is the number of ADDs run in all.
	FirstAttemptFailed, GaveUp, Attempts int
	// Errors counts ADD errors by message (container IDs and addresses cut off).
	Errors map[string]int
	// Hung counts ADD attempts that had not returned a minute after whereabouts' own
	// time limit; they are counted as failed and left running.
	Hung int
}

// node is one simulated node: its own connections to the API server, as a node's
// CNI plugin processes have (not shared with other nodes).
type node struct {
	cfg  *rest.Config
	http *http.Client
}

func newNode(base *rest.Config, name string) (*node, error) {
	cfg := rest.CopyConfig(base)
	// The CNI binary loads a kubeconfig: client-go's default client-side limits
	// (5 QPS, burst 10) apply per ADD, since each ADD is its own process and gets its
	// own clients below.
	cfg.QPS, cfg.Burst = 0, 0
	// A dialer of its own keeps client-go from sharing one transport between the
	// in-process nodes.
	var dialer net.Dialer
	cfg.Dial = dialer.DialContext
	cfg.UserAgent = "whereabouts/" + name
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &node{cfg: cfg, http: hc}, nil
}

// netConf is the CNI network configuration whereabouts' plugin reads on stdin.
func netConf(o Options, flatConfig string) []byte {
	return fmt.Appendf(nil, `{"cniVersion": "1.0.0", "name": "limit", "type": "macvlan",
  "ipam": {"type": "whereabouts", "range": %q, "range_start": %q, "range_end": %q, "configuration_path": %q}}`,
		o.Range, o.RangeStart, o.RangeEnd, flatConfig)
}

// add runs one CNI ADD through whereabouts as its plugin's cmdAdd does: load the IPAM
// configuration, build a Kubernetes IPAM with fresh clients, and call IPManagement
// under the plugin's own time limit.
func (n *node) add(o Options, stdin []byte, pod, containerID string) (net.IP, error) {
	args := fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s", o.Namespace, pod, containerID)
	conf, _, err := wbconfig.LoadIPAMConfig(stdin, args)
	if err != nil {
		return nil, fmt.Errorf("load IPAM configuration: %w", err)
	}
	cs, err := kubernetes.NewForConfigAndClient(n.cfg, n.http)
	if err != nil {
		return nil, err
	}
	wc, err := wbclient.NewForConfigAndClient(n.cfg, n.http)
	if err != nil {
		return nil, err
	}
	ipam := &wbk8s.KubernetesIPAM{
		Client:      *wbk8s.NewKubernetesClient(wc, cs),
		Config:      *conf,
		Namespace:   o.Namespace,
		ContainerID: containerID,
		IfName:      "eth0",
	}
	ctx, cancel := context.WithTimeout(context.Background(), wbtypes.AddTimeLimit)
	defer cancel()
	ips, err := wbk8s.IPManagement(ctx, wbtypes.Allocate, ipam.Config, ipam)
	if err != nil {
		return nil, err
	}
	if len(ips) != 1 || ips[0].IP == nil {
		return nil, fmt.Errorf("whereabouts returned %v for one range, want one address", ips)
	}
	return ips[0].IP, nil
}

// Run creates the namespace and runs every pod's ADD at once, each from its node,
// retrying a failed ADD as a kubelet would until Attempts are used.
func Run(cp *ControlPlane, o Options) (*Result, error) {
	if o.Attempts < 1 {
		o.Attempts = 1
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", o.Namespace, err)
	}
	nodes := make([]*node, o.Nodes)
	for i := range nodes {
		if nodes[i], err = newNode(cp.Config, fmt.Sprintf("%s-node-%d", o.Namespace, i)); err != nil {
			return nil, err
		}
	}
	stdin := netConf(o, cp.FlatConfig)

	type outcome struct {
		ip       net.IP
		attempts []time.Duration
		errs     []error
		hung     int
		toIP     time.Duration
	}
	out := make([]outcome, o.Pods)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range o.Pods {
		wg.Go(func() {
			n, pod := nodes[i%o.Nodes], fmt.Sprintf("pod-%d", i)
			for a := range o.Attempts {
				t0 := time.Now()
				ip, hung, err := n.addWithWatchdog(o, stdin, pod, fmt.Sprintf("c-%d-%d", i, a))
				out[i].attempts = append(out[i].attempts, time.Since(t0))
				if hung {
					out[i].hung++
				}
				if err == nil {
					out[i].ip, out[i].toIP = ip, time.Since(start)
					return
				}
				out[i].errs = append(out[i].errs, err)
			}
		})
	}
	wg.Wait()
	r := &Result{Wall: time.Since(start), Allocated: map[int]net.IP{}, Errors: map[string]int{}}
	for i, oc := range out {
		r.Attempts += len(oc.attempts)
		r.AttemptLatency = append(r.AttemptLatency, oc.attempts...)
		r.Hung += oc.hung
		if len(oc.errs) > 0 {
			r.FirstAttemptFailed++
		}
		for _, e := range oc.errs {
			r.Errors[errorKind(e)]++
		}
		if oc.ip == nil {
			r.GaveUp++
			continue
		}
		r.Allocated[i] = oc.ip
		r.PodLatency = append(r.PodLatency, oc.toIP)
	}
	sortDurations(r.AttemptLatency)
	sortDurations(r.PodLatency)
	return r, nil
}

// errHung is an ADD that outlived whereabouts' own time limit by a minute; a
// container runtime would have killed the plugin process by then.
var errHung = errors.New("ADD did not return a minute after whereabouts' own time limit")

func (n *node) addWithWatchdog(o Options, stdin []byte, pod, containerID string) (net.IP, bool, error) {
	type res struct {
		ip  net.IP
		err error
	}
	ch := make(chan res, 1)
	go func() {
		ip, err := n.add(o, stdin, pod, containerID)
		ch <- res{ip, err}
	}()
	t := time.NewTimer(wbtypes.AddTimeLimit + time.Minute)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.ip, false, r.err
	case <-t.C:
		return nil, true, errHung
	}
}

func errorKind(err error) string {
	s := err.Error()
	if len(s) > 90 {
		s = s[:90]
	}
	return s
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

// Percentile of sorted durations; 0 when there are none.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)*p/100, len(sorted)-1)]
}

// Check reads whereabouts' pool and overlapping-range reservations back and checks
// what a user relies on: every allocated pod holds exactly one address, the address
// its ADD returned; no address is held twice; and every address lies in the range.
// It returns the addresses held by pods whose ADDs all failed (an ADD can fail after
// its write landed): leaked until a DEL or whereabouts' reconciler releases them.
func Check(cp *ControlPlane, o Options, r *Result) (leaked []string, err error) {
	ctx := context.Background()
	wc, err := wbclient.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	_, ipnet, err := net.ParseCIDR(o.Range)
	if err != nil {
		return nil, fmt.Errorf("options: range %q: %w", o.Range, err)
	}
	name := wbk8s.IPPoolName(wbk8s.PoolIdentifier{IpRange: ipnet.String()})
	pool, err := wc.WhereaboutsV1alpha1().IPPools(o.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if len(r.Allocated) == 0 && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read pool %s/%s: %w", o.Namespace, name, err)
	}
	first, _, err := pool.ParseCIDR()
	if err != nil {
		return nil, err
	}
	lo, hi := net.ParseIP(o.RangeStart), net.ParseIP(o.RangeEnd)
	var problems []string
	byPod := map[string]string{}
	for off, a := range pool.Spec.Allocations {
		var n uint64
		if _, err := fmt.Sscan(off, &n); err != nil {
			problems = append(problems, fmt.Sprintf("allocation key %q is not an offset", off))
			continue
		}
		ip := iphelpers.IPAddOffset(first, n).String()
		if prev, dup := byPod[a.PodRef]; dup {
			problems = append(problems, fmt.Sprintf("pod %s holds %s and %s", a.PodRef, prev, ip))
		}
		byPod[a.PodRef] = ip
		if p := net.ParseIP(ip); iphelpers.CompareIPs(p, lo) < 0 || iphelpers.CompareIPs(p, hi) > 0 {
			problems = append(problems, fmt.Sprintf("%s (pod %s) lies outside %s-%s", ip, a.PodRef, o.RangeStart, o.RangeEnd))
		}
	}
	seen := map[string]int{}
	for i, ip := range r.Allocated {
		ref := fmt.Sprintf("%s/pod-%d", o.Namespace, i)
		if prev, dup := seen[ip.String()]; dup {
			problems = append(problems, fmt.Sprintf("%s was returned to pod-%d and pod-%d", ip, prev, i))
		}
		seen[ip.String()] = i
		if got := byPod[ref]; got != ip.String() {
			problems = append(problems, fmt.Sprintf("pod %s was given %s but the pool records %q", ref, ip, got))
		}
	}
	allocated := map[string]bool{}
	for i := range r.Allocated {
		allocated[fmt.Sprintf("%s/pod-%d", o.Namespace, i)] = true
	}
	for ref, ip := range byPod {
		if !allocated[ref] {
			leaked = append(leaked, ip+" ("+ref+")")
		}
	}
	sort.Strings(leaked)
	res, err := wc.WhereaboutsV1alpha1().OverlappingRangeIPReservations(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return leaked, fmt.Errorf("list overlapping-range reservations: %w", err)
	}
	for _, rv := range res.Items {
		ip := strings.ReplaceAll(rv.Name, "-", ":")
		if byPod[rv.Spec.PodRef] != ip {
			problems = append(problems, fmt.Sprintf("reservation %s names pod %s, whose pool address is %q", rv.Name, rv.Spec.PodRef, byPod[rv.Spec.PodRef]))
		}
	}
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
		}
		return leaked, errors.New(strings.Join(problems, "; "))
	}
	return leaked, nil
}
