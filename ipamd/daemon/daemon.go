// Package daemon wires one ipamd: informer caches for its node, the ledger,
// the service, the event recorder and the socket server. cmd/nicpool-ipamd parses
// flags into Options; tests start several daemons in one process.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/ipamd/server"
	"github.com/nicpool/nicpool/ipamd/service"
)

// Options configure one daemon.
type Options struct {
	NodeName string
	// SocketPath is where the API is served; empty serves nothing (tests call the
	// service directly or through Handler).
	SocketPath string
	// SpiderpoolSocketPath is where ipamd answers, in the place of spiderpool's agent,
	// what spiderpool's coordinator plugin asks (server.SpiderpoolHandler); empty
	// serves nothing there and reads no SpiderCoordinator.
	SpiderpoolSocketPath string
	Scheme               *runtime.Scheme
	Log                  logr.Logger
	// AllocationOrder is which free address of a pool an allocation takes
	// (allocator.NextAfterLast, the zero value, or allocator.Lowest).
	AllocationOrder allocator.Order
	// RecordCheckInterval is how often CheckRecords runs; DefaultRecordCheckInterval
	// when zero, never when negative (tests call it themselves).
	RecordCheckInterval time.Duration
	// Multus says how a bare spec.multusName entry reads (Multus.Namespace;
	// DefaultMultusNamespace when empty) and which network eth0 is attached through.
	Multus annotations.Multus
	// LeaseNamespace, when set, is where the daemon keeps its node's heartbeat Lease
	// (LeaseName) renewed once its caches have synced.
	LeaseNamespace string
	// Switches are spiderpool-conf's IPAM switches (service.Service.Switches).
	Switches ipamconf.Switches
}

// DefaultMultusNamespace is nicpool's namespace as its manifests install it: where a
// bare spec.multusName entry names a NetworkAttachmentDefinition unless told otherwise.
const DefaultMultusNamespace = "nicpool-system"

// Daemon is one node's ipamd.
type Daemon struct {
	Service *service.Service
	Cache   cache.Cache
	opts    Options
	synced  atomic.Bool
	events  events.EventBroadcaster
	// recorder records the daemon's own Events; fresh reads the API server.
	recorder events.EventRecorder
	fresh    client.Reader
	records  recordCheck
	writer   client.Client
	// discovery says which APIs the cluster serves.
	discovery discovery.DiscoveryInterface
	// released is closed once the heartbeat Lease is released after ctx ended.
	released chan struct{}
}

// New builds a daemon for cfg; Start starts it.
func New(cfg *rest.Config, opts Options) (*Daemon, error) {
	if opts.NodeName == "" {
		return nil, errors.New("node name is required: set --node-name or NODE_NAME (the downward API's spec.nodeName)")
	}
	if opts.Scheme == nil {
		return nil, errors.New("a scheme with core and spiderpool types is required")
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme: opts.Scheme,
		// ipamd never reads managedFields, and a write that omits them keeps them.
		DefaultTransform: cache.TransformStripManagedFields(),
		// A watch the API server drops under load is resumed, not relisted.
		NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			return toolscache.NewSharedIndexInformer(ResumingListerWatcher(lw), obj, resync, indexers)
		},
		ByObject: map[client.Object]cache.ByObject{
			// Only this node's pods, endpoints and blocks and this node: the rest of the
			// cluster is not ours, and its changes are no events of ours. A StatefulSet
			// pod that moved here from another node is found by a direct read.
			&corev1.Pod{}:             {Field: fields.OneTermEqualSelector("spec.nodeName", opts.NodeName)},
			&corev1.Node{}:            {Field: fields.OneTermEqualSelector("metadata.name", opts.NodeName)},
			&v2beta1.SpiderEndpoint{}: {Field: fields.OneTermEqualSelector("status.current.node", opts.NodeName)},
			&ipamv1alpha1.IPBlock{}:   {Field: fields.OneTermEqualSelector(ipamv1alpha1.FieldNode, opts.NodeName)},
			&v2beta1.SpiderIPPool{}:   {Transform: TransformPool(opts.Log.WithValues("node", opts.NodeName))},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("informer cache: %w", err)
	}
	if err := service.Indexes(context.Background(), c); err != nil {
		return nil, fmt.Errorf("cache indexes: %w", err)
	}
	writer, err := client.New(cfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	log := opts.Log.WithValues("node", opts.NodeName)
	eb := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	rec := eb.NewRecorder(opts.Scheme, "nicpool-ipamd")
	l := ledger.New(ledger.Options{Node: opts.NodeName, Order: opts.AllocationOrder, Cache: c, Client: writer, Fresh: writer, Log: log.WithName("ledger")})
	svc := service.New(opts.NodeName, c, writer, writer, l, rec, log)
	svc.Multus = opts.Multus
	svc.Switches = opts.Switches
	if svc.Multus.Namespace == "" {
		svc.Multus.Namespace = DefaultMultusNamespace
	}
	return &Daemon{Service: svc, Cache: c, opts: opts, events: eb, recorder: rec, fresh: writer,
		records: recordCheck{suspects: map[string]bool{}, reported: map[string]bool{}},
		writer:  writer, discovery: cs.Discovery(), released: make(chan struct{})}, nil
}

// Released is closed, once the context of Start has ended, when the heartbeat Lease
// has been released (at once when the daemon keeps none): a stopping ipamd waits for
// it, so that its node is seen without ipamd at once.
func (d *Daemon) Released() <-chan struct{} { return d.released }

// Ready reports whether the caches have synced.
func (d *Daemon) Ready() bool { return d.synced.Load() }

// Handler is the socket API of this daemon.
func (d *Daemon) Handler() http.Handler { return server.Handler(d.Service, d.Ready) }

// Start starts the caches and the event sink and waits for the caches to sync. The
// socket (when configured) is served from the start, answering "try again later"
// until then. Everything stops when ctx ends; Start returns once synced, or with
// the socket's error.
func (d *Daemon) Start(ctx context.Context) (<-chan error, error) {
	for _, obj := range []client.Object{&v2beta1.SpiderIPPool{}, &v2beta1.SpiderReservedIP{}, &v2beta1.SpiderEndpoint{}, &ipamv1alpha1.IPBlock{},
		&corev1.Pod{}, &corev1.Node{}, &corev1.Namespace{}, &appsv1.StatefulSet{}} {
		if _, err := d.Cache.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	done := make(chan error, 3)
	if d.opts.SpiderpoolSocketPath != "" {
		if err := d.startCoordinatorCaches(ctx); err != nil {
			return nil, err
		}
		l, err := server.Listen(d.opts.SpiderpoolSocketPath)
		if err != nil {
			return nil, err
		}
		go func() { done <- server.Serve(ctx, l, server.SpiderpoolHandler(d.Service, d.Ready)) }()
	}
	if d.opts.SocketPath != "" {
		l, err := server.Listen(d.opts.SocketPath)
		if err != nil {
			return nil, err
		}
		go func() { done <- server.Serve(ctx, l, d.Handler()) }()
	}
	if err := d.events.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("event sink: %w", err)
	}
	go func() {
		<-ctx.Done()
		d.events.Shutdown()
	}()
	go func() { done <- d.Cache.Start(ctx) }()
	if !d.Cache.WaitForCacheSync(ctx) {
		return nil, errors.New("caches did not sync before shutdown")
	}
	d.synced.Store(true)
	if d.opts.LeaseNamespace != "" {
		go func() {
			defer close(d.released)
			d.heartbeat(ctx, d.writer, d.opts.LeaseNamespace)
		}()
	} else {
		close(d.released)
	}
	d.opts.Log.Info("caches synced: serving", "node", d.opts.NodeName, "socket", d.opts.SocketPath)
	if interval := cmp.Or(d.opts.RecordCheckInterval, DefaultRecordCheckInterval); interval > 0 {
		go d.checkRecords(ctx, interval)
	}
	return done, nil
}

// startCoordinatorCaches starts the informers coordinator's answers are read from:
// SpiderCoordinators and the cluster's ServiceCIDRs, each only where the API server
// serves it (a cache of a kind it does not serve would never sync, and ipamd would
// never be ready for any pod).
func (d *Daemon) startCoordinatorCaches(ctx context.Context) error {
	served, err := coordinator.Discover(d.discovery)
	if err != nil {
		return err
	}
	if served.SpiderCoordinators {
		if _, err := d.Cache.GetInformer(ctx, &v2beta1.SpiderCoordinator{}); err != nil {
			return fmt.Errorf("informer for SpiderCoordinators: %w", err)
		}
		d.Service.SpiderCoordinators = true
	} else {
		d.opts.Log.Info(coordinator.NoCRD+": coordinator's configuration is refused", "node", d.opts.NodeName)
	}
	if served.ServiceCIDRs {
		if _, err := d.Cache.GetInformer(ctx, &networkingv1.ServiceCIDR{}); err != nil {
			return fmt.Errorf("informer for ServiceCIDRs: %w", err)
		}
		d.Service.ServiceCIDRs = true
	} else {
		d.opts.Log.Info("the cluster serves no networking.k8s.io/v1 ServiceCIDR: coordinator's configuration is refused", "node", d.opts.NodeName)
	}
	return nil
}

// TransformPool is how ipamd caches a pool: without managedFields, and without the
// string of records nicpool's pool counter writes into status.allocatedIPs (a copy of
// the blocks, up to 512 KiB, that ipamd never reads); spiderpool's own string, not
// migrated yet, is kept, as it closes the pool (allocator.Refusal). A pool whose status
// does not decode is logged by name: it alone serves nothing.
func TransformPool(log logr.Logger) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(o any) (any, error) {
		o, err := strip(o)
		if p, ok := o.(*v2beta1.SpiderIPPool); ok && err == nil {
			if p.Status.Unreadable != "" {
				log.Info("pool's status does not decode: the pool serves nothing until it is repaired; every other pool serves", "pool", p.Name, "problem", p.Status.Unreadable)
			}
			if p.Status.SpiderpoolRecords() {
				log.Info("pool's status.allocatedIPs holds spiderpool's records, not moved into IPBlocks yet: the pool serves nothing until kubectl nicpool migrate from-spiderpool --apply moves them", "pool", p.Name)
			} else {
				p.Status.AllocatedIPs = nil
			}
		}
		return o, err
	}
}
