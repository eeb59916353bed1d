package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/fabric"
	"github.com/nicpool/nicpool/e2e/kubelet"
	"github.com/nicpool/nicpool/e2e/node"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// Options tune a local stack.
type Options struct {
	// Dir holds the state of the run (kubeconfigs, logs, CNI caches); a new temporary
	// directory when empty, removed by Down.
	Dir string
	// Kubeconfig, when set, receives the admin kubeconfig (`make run`: .local/kubeconfig).
	Kubeconfig string
	// Nodes is the number of node stand-ins (default 3).
	Nodes int
	// Node says what plays the nodes: stand-ins (default) or real kubelets.
	Node NodeKind
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// Install, when set, installs nicpool in place of the stack's own setup (a Helm
	// release, say): it must leave in Namespace the objects of an installation, the
	// webhook's Deployment nicpool-webhook and ipamd's DaemonSet nicpool-ipamd among
	// them. On stand-in nodes the stack then runs nicpool-webhook and each node's
	// nicpool-ipamd as that Deployment's and DaemonSet's containers say (arguments,
	// environment, service account), on loopback ports and the node's socket, and
	// points the installed webhook configurations at its webhook (stand-ins have no
	// Service routing). On real nodes it runs once the nodes are up, in place of
	// `kubectl apply -k`: the nodes run what it installed from its images, and the
	// stack waits, as for its own install, until ipamd is ready on every node and
	// the webhook available with its CA injected.
	Install func(ctx context.Context, s *Stack) error
	// Images are the image archives real nodes import: every archive of ImagesDir
	// (`make images`) when empty.
	Images []string
	// Registry is a registry real nodes pull from: the stack serves it on the
	// cluster network's gateway (Stack.Registry says where), and the nodes'
	// containerd accepts it over plain HTTP.
	Registry http.Handler
	// Namespace is nicpool's namespace: configs.DefaultNamespace when empty.
	Namespace string
	// Source is the checkout nicpool's binaries are built from: this one by default.
	Source binaries.Checkout
}

// Stack is a running local cluster: control plane, controllers, scheduler, node
// stand-ins wired by a fabric, and nicpool's components.
type Stack struct {
	*cluster.Cluster
	Fabric *fabric.Fabric
	Nodes  []*node.Node
	// Kubelets are the real nodes (Node kind kubelet).
	Kubelets []*kubelet.Node
	// NodeKind is what plays the nodes.
	NodeKind NodeKind
	// Webhook is the nicpool-webhook process.
	Webhook *cluster.Process
	// Dir holds the state of the run.
	Dir string

	binDir string
	ipamd  map[string]*cluster.Process
	// namespace is nicpool's; install and source are Options' (installed.go).
	namespace string
	install   func(ctx context.Context, s *Stack) error
	source    binaries.Checkout
	// serviceClients are the installed webhook configurations' own client
	// configurations, put back before an upgrade (installed.go).
	serviceClients map[string]admissionregistrationv1.WebhookClientConfig
	// webhookPort and webhookProbe are where nicpool-webhook serves admission and
	// readiness; kept so that a restarted webhook serves where it is registered.
	webhookPort, webhookProbe int

	// Real nodes: the API server's way into the cluster network, its publication on
	// the fabric, the fabric's kube-proxy and its relay to the API server.
	nodeCount   int
	egress      *kubelet.EgressProxy
	apiRelay    io.Closer
	fabricRelay io.Closer
	fabricProxy *cluster.Process
	// registry serves Options.Registry on the fabric at registryHost.
	registry     *http.Server
	registryHost string

	out    io.Writer
	ownDir bool
	logs   []*os.File
	// footprint is what the stack started, kept past Down for Leftovers.
	footprint footprint
}

// standInControllers run beside cluster.Controllers on the stand-in nodes: DaemonSets,
// whose pods the stand-ins serve as any other (spiderpool's own e2e suites create
// DaemonSets: e2e/peers/spiderpool).
var standInControllers = []string{"daemonset-controller"}

// Up starts everything. On error, what was started is stopped again.
func Up(ctx context.Context, opts Options) (s *Stack, err error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Node == "" {
		opts.Node = NodeStandIn
	}
	if opts.Namespace == "" {
		opts.Namespace = configs.DefaultNamespace
	}
	if opts.Node == NodeStandIn && (len(opts.Images) > 0 || opts.Registry != nil) {
		return nil, errors.New("local: Options.Images and Options.Registry are for real nodes (Node kubelet): stand-ins run no images")
	}
	s = &Stack{Dir: opts.Dir, NodeKind: opts.Node, nodeCount: opts.Nodes, out: opts.Out, binDir: testenv.BinDir(), ipamd: map[string]*cluster.Process{},
		namespace: opts.Namespace, install: opts.Install, source: opts.Source}
	if s.out == nil {
		s.out = io.Discard
	}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "nicpool-local-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	if s.Dir, err = filepath.Abs(s.Dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Down())
		}
	}()
	s.progress("network fabric: %d nodes, uplinks %s", opts.Nodes, strings.Join(Uplinks, ", "))
	if s.Fabric, err = fabric.New(Uplinks...); err != nil {
		return s, err
	}
	if s.NodeKind == NodeKubelet {
		err = s.upKubelet(ctx, opts)
		s.remember()
		return s, err
	}
	s.progress("control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler from %s", testenv.BinDir())
	if s.Cluster, err = cluster.Start(ctx, cluster.Options{Dir: filepath.Join(s.Dir, "cluster"), Kubeconfig: opts.Kubeconfig, ExtraControllers: standInControllers}); err != nil {
		return s, err
	}
	s.progress("nicpool: building the plugin, ipamd and webhook; starting the webhook with self-managed certificates")
	if err := s.buildNicpool(ctx); err != nil {
		return s, err
	}
	if err := s.startWebhook(ctx); err != nil {
		return s, err
	}
	if err := s.createClusterNetwork(ctx); err != nil {
		return s, err
	}
	for i := range opts.Nodes {
		if err := s.addNode(ctx, i); err != nil {
			return s, err
		}
	}
	s.progress("node stand-ins: %d ready", len(s.Nodes))
	s.remember()
	return s, nil
}

// upKubelet starts the control plane, real nodes, and installs nicpool on them.
func (s *Stack) upKubelet(ctx context.Context, opts Options) error {
	images := opts.Images
	if len(images) == 0 {
		var err error
		if images, err = imageArchives(); err != nil {
			return err
		}
	}
	s.progress("control plane: etcd, kube-apiserver (egress through the fabric), kube-controller-manager, kube-scheduler, kube-proxy on the fabric")
	if err := s.startKubeletCluster(ctx, opts.Kubeconfig); err != nil {
		return err
	}
	if opts.Registry != nil {
		if err := s.serveRegistry(opts.Registry); err != nil {
			return err
		}
		s.progress("registry: served to the nodes at %s (plain HTTP)", s.registryHost)
	}
	s.progress("real nodes: %d × kubelet + containerd + runc, importing %d images", opts.Nodes, len(images))
	for i := range opts.Nodes {
		if err := s.addRealNode(ctx, i, images); err != nil {
			return err
		}
	}
	if err := s.installNicpool(ctx, images); err != nil {
		return err
	}
	s.progress("nicpool: ipamd ready on %d nodes, webhook available", len(s.Kubelets))
	return nil
}

func (s *Stack) addNode(ctx context.Context, i int) error {
	name := fmt.Sprintf("node-%d", i+1)
	net, err := s.Fabric.AddNode(name)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "nodes", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	log, err := s.logFile(filepath.Join(dir, "node.log"))
	if err != nil {
		return err
	}
	runDir := filepath.Join(dir, "run")
	// The Node first: ipamd's token is bound to it. Pods are scheduled to it once it
	// is Ready; their ADD waits for ipamd's socket.
	n, err := node.Start(ctx, node.Config{
		Name:           name,
		PodCIDR:        fmt.Sprintf("10.244.%d.0/24", i+1),
		Net:            net,
		Clientset:      s.Clientset,
		Kubeconfig:     s.AdminKubeconfig,
		BinDir:         s.binDir,
		Dir:            dir,
		RunDir:         runDir,
		LogDir:         filepath.Join(dir, "log"),
		ClusterNetwork: clusterNetworkName,
		Log:            log,
	})
	if err != nil {
		return err
	}
	s.Nodes = append(s.Nodes, n)
	p, err := s.startIpamd(ctx, name, dir, runDir)
	if p != nil {
		s.ipamd[name] = p
	}
	return err
}

func (s *Stack) logFile(path string) (logr.Logger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return logr.Discard(), err
	}
	s.logs = append(s.logs, f)
	return logr.FromSlogHandler(slog.NewTextHandler(f, nil)), nil
}

// Sandbox finds the network namespace of a pod on whichever node runs it.
func (s *Stack) Sandbox(namespace, name string) (string, bool) {
	if s.NodeKind == NodeKubelet {
		return s.realSandbox(namespace, name)
	}
	for _, n := range s.Nodes {
		if path, ok := n.Sandbox(namespace, name); ok {
			return path, true
		}
	}
	return "", false
}

func (s *Stack) progress(format string, args ...any) {
	fmt.Fprintf(s.out, format+"\n", args...)
}

// Down stops everything Up started, in reverse order, and removes the network
// namespaces. It is safe on a partly started stack.
func (s *Stack) Down() error {
	s.remember()
	var errs []error
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		s.Nodes[i].Stop()
	}
	s.Nodes = nil
	errs = append(errs, s.stopKubeletMode())
	errs = append(errs, s.stopNicpool())
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Stop()) //nolint:staticcheck // QF1008: s.Stop() would read as stopping the whole stack
		s.Cluster = nil
	}
	if s.Fabric != nil {
		errs = append(errs, s.Fabric.Close())
		s.Fabric = nil
	}
	for _, f := range s.logs {
		_ = f.Close()
	}
	s.logs = nil
	if s.ownDir {
		errs = append(errs, os.RemoveAll(s.Dir))
		s.ownDir = false
	}
	return errors.Join(errs...)
}
