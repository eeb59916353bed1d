package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/nicpool/nicpool/e2e/fabric"
)

// Config describes one node stand-in.
type Config struct {
	// Name of the Node object.
	Name string
	// PodCIDR is recorded on the Node, as a node IPAM controller would.
	PodCIDR string
	// Net is the node's network namespace with its uplinks.
	Net *fabric.Node
	// Clientset reaches the API server as an admin.
	Clientset kubernetes.Interface
	// Kubeconfig is a kubeconfig for Multus; its server is rewritten to reach the API
	// server from inside the node's namespace.
	Kubeconfig string
	// BinDir holds multus and the plugins it delegates to.
	BinDir string
	// Dir holds the node's CNI configuration, caches and logs.
	Dir string
	// RunDir is what the node's plugins see as /run/nicpool (its ipamd socket).
	RunDir string
	// LogDir is what the node's plugins see as /var/log/nicpool (their logs).
	LogDir string
	// ClusterNetwork is the NetworkAttachmentDefinition in kube-system (Multus's
	// namespace) that Multus attaches every pod's eth0 through when the pod names no
	// v1.multus-cni.io/default-network: its clusterNetwork.
	ClusterNetwork string
	// Workers is how many pods are set up or torn down at once (default 3);
	// SetWorkers changes it while the node runs.
	Workers int
	Log     logr.Logger
}

// Node is a running node stand-in.
type Node struct {
	cfg       Config
	cni       *libcni.CNIConfig
	multus    *libcni.NetworkConfigList
	queue     workqueue.TypedRateLimitingInterface[string]
	pods      listerscorev1.PodLister
	recorder  record.EventRecorder
	events    record.EventBroadcaster
	forwarder interface{ Close() error }
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	// ctx is what the workers run under; running is how many run, workers how many
	// should (SetWorkers): a worker over the count stops after its pod.
	ctx     context.Context
	running int
	workers int
	// partitioned: the node is cut off (Partition); missed are the pods it did not
	// act on meanwhile.
	partitioned bool
	missed      map[string]bool
}

// sandbox is a pod's network namespace with the interfaces CNI ADD put in it.
type sandbox struct {
	uid         string
	containerID string
	namespace   string
	path        string
	// ready is set once CNI ADD succeeded; a sandbox that is not ready is one whose
	// failed ADD could not be undone yet (CNI DEL failed too).
	ready bool
}

// Start registers the Node and starts serving the pods bound to it until Stop; ctx
// bounds the registration only.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Workers == 0 {
		cfg.Workers = 3
	}
	n := &Node{cfg: cfg, sandboxes: map[string]*sandbox{}}
	for _, d := range []string{cfg.Dir, cfg.RunDir, cfg.LogDir, filepath.Join(cfg.Dir, "net.d"), RunDirMount, LogDirMount,
		filepath.Join(n.SpidernetDir(), "run"), filepath.Join(n.SpidernetDir(), "log"), SpidernetRunDirMount, SpidernetLogDirMount} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.writeMultusConfig(); err != nil {
		n.Stop()
		return nil, err
	}
	if err := n.register(ctx); err != nil {
		n.Stop()
		return nil, err
	}
	n.serve()
	return n, nil
}

// Name is the Node's name.
func (n *Node) Name() string { return n.cfg.Name }

// RunDir and LogDir are where the node's /run/nicpool and /var/log/nicpool are on
// this host.
func (n *Node) RunDir() string { return n.cfg.RunDir }
func (n *Node) LogDir() string { return n.cfg.LogDir }

// SpidernetDir holds what the node's plugins see as /var/run/spidernet (its run
// subdirectory: spiderpool's agent socket, which the node's ipamd serves) and
// /var/log/spidernet (its log subdirectory: coordinator's log).
func (n *Node) SpidernetDir() string { return filepath.Join(n.cfg.Dir, "spidernet") }

// writeMultusConfig writes the Multus thin plugin's configuration: the cluster
// network as its delegate, secondary networks from NetworkAttachmentDefinitions.
func (n *Node) writeMultusConfig() error {
	kc, err := clientcmd.LoadFromFile(n.cfg.Kubeconfig)
	if err != nil {
		return err
	}
	var target string
	for _, c := range kc.Clusters {
		target = c.Server[len("https://"):]
	}
	addr, closer, err := n.cfg.Net.Forward(target)
	if err != nil {
		return fmt.Errorf("forward API server into node %s: %w", n.cfg.Name, err)
	}
	n.forwarder = closer
	for _, c := range kc.Clusters {
		c.Server = "https://" + addr
	}
	multusKubeconfig := filepath.Join(n.cfg.Dir, "multus.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, multusKubeconfig); err != nil {
		return err
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "multus-cni-network",
		"type":       "multus",
		"kubeconfig": multusKubeconfig,
		"confDir":    filepath.Join(n.cfg.Dir, "net.d"),
		"cniDir":     filepath.Join(n.cfg.Dir, "multus"),
		"binDir":     n.cfg.BinDir,
		"logFile":    filepath.Join(n.cfg.Dir, "multus.log"),
		"logLevel":   "verbose",
		// Read from the API server at each ADD, as the pod's annotations are.
		"clusterNetwork":  n.cfg.ClusterNetwork,
		"multusNamespace": "kube-system",
	}
	list := map[string]any{"cniVersion": "1.0.0", "name": "multus-cni-network", "plugins": []any{conf}}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.cfg.Dir, "00-multus.conflist"), data, 0o644); err != nil {
		return err
	}
	if n.multus, err = libcni.NetworkConfFromBytes(data); err != nil {
		return err
	}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{n.cfg.BinDir}, filepath.Join(n.cfg.Dir, "cni-cache"),
		&nodeExec{namespace: n.cfg.Net.Namespace, runDir: n.cfg.RunDir, logDir: n.cfg.LogDir, spidernetDir: n.SpidernetDir()})
	return nil
}

// register creates the Node as Ready with room for pods. There is no node lifecycle
// controller in the local cluster, so the stand-in also lifts the not-ready taint the
// API server puts on new nodes.
func (n *Node) register(ctx context.Context) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.cfg.Name,
			Labels: map[string]string{"kubernetes.io/hostname": n.cfg.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		},
		Spec: corev1.NodeSpec{PodCIDR: n.cfg.PodCIDR, PodCIDRs: []string{n.cfg.PodCIDR}},
	}
	nodes := n.cfg.Clientset.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.cfg.Name, err)
	}
	created.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "node stand-in is ready", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: hostIP}, {Type: corev1.NodeHostName, Address: n.cfg.Name}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "nicpool-e2e", OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "nicpool-e2e://0"},
	}
	updated, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("report node %s ready: %w", n.cfg.Name, err)
	}
	if len(updated.Spec.Taints) > 0 {
		updated.Spec.Taints = nil
		if _, err := nodes.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("untaint node %s: %w", n.cfg.Name, err)
		}
	}
	return nil
}

func (n *Node) serve() {
	var ctx context.Context
	ctx, n.cancel = context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(n.cfg.Clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + n.cfg.Name }))
	informer := factory.Core().V1().Pods()
	n.pods = informer.Lister()
	n.queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 20*time.Second))
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			n.queue.Add(key)
		}
	}
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	n.events = record.NewBroadcaster(record.WithContext(ctx))
	n.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.cfg.Clientset.CoreV1().Events("")})
	n.recorder = n.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.cfg.Name})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	n.ctx = ctx
	n.SetWorkers(n.cfg.Workers)
}

// SetWorkers sets how many pods the node sets up or tears down at once, and returns
// the count it replaces. A kubelet gives each pod a worker of its own, so its pods'
// sandboxes are set up all at once; a stand-in bounds that (Config.Workers), and a
// spec that needs a kubelet's concurrency raises the bound for a while. Workers over
// a lowered count stop once their pod is done.
func (n *Node) SetWorkers(count int) int {
	n.mu.Lock()
	previous := n.workers
	n.workers = max(count, 1)
	start := n.workers - n.running
	n.running += max(start, 0)
	n.mu.Unlock()
	for range start {
		n.wg.Go(func() {
			for n.next(n.ctx) && !n.retire() {
			}
		})
	}
	return previous
}

// retire reports whether a worker that is done with its pod is over the count and
// stops.
func (n *Node) retire() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running > n.workers {
		n.running--
		return true
	}
	return false
}

func (n *Node) next(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	if err := n.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			n.cfg.Log.Info("sync failed, retrying", "pod", key, "error", err.Error())
			n.queue.AddRateLimited(key)
		}
		return true
	}
	n.queue.Forget(key)
	return true
}

// Stop stops serving pods and removes the pods' network namespaces. It does not run
// CNI DEL: the cluster is going away with everything the plugins recorded.
func (n *Node) Stop() {
	if n.cancel != nil {
		n.cancel()
		n.queue.ShutDown()
		n.wg.Wait()
		n.events.Shutdown()
	}
	n.mu.Lock()
	for key, sb := range n.sandboxes {
		_ = fabric.DeleteNamespace(sb.namespace)
		delete(n.sandboxes, key)
	}
	n.mu.Unlock()
	if n.forwarder != nil {
		_ = n.forwarder.Close()
	}
}

// Sandbox returns the network namespace path of a pod on this node, if it has one.
func (n *Node) Sandbox(namespace, name string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sb, ok := n.sandboxes[namespace+"/"+name]
	if !ok {
		return "", false
	}
	return sb.path, true
}

// Forget drops a pod's sandbox without CNI DEL, as a node that rebooted has lost its
// runtime's state: nothing on the node will release the pod's addresses any more, only
// the cluster's garbage collector can. It reports whether there was a sandbox.
func (n *Node) Forget(namespace, name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := namespace + "/" + name
	sb, ok := n.sandboxes[key]
	if !ok {
		return false
	}
	_ = fabric.DeleteNamespace(sb.namespace)
	delete(n.sandboxes, key)
	return true
}

func (n *Node) sandbox(key string) *sandbox {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sandboxes[key]
}

func (n *Node) setSandbox(key string, sb *sandbox) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if sb == nil {
		delete(n.sandboxes, key)
		return
	}
	n.sandboxes[key] = sb
}

var errGone = errors.New("pod is gone")

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
