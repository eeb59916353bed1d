package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// Pod is one pod of a run, as a node's runtime knows it.
type Pod struct {
	Namespace, Name, UID string
	// Node is the index of the node it is bound to.
	Node int
}

// world is what a run sets up before its clock starts: the pool, the nodes and
// their pods in the API server, one nicpool-ipamd process per node, and one
// nicpool-webhook replica for the cluster controllers a deployment runs beside them
// (the pool counter writes each pool's status, spiderpool's allocatedIPs included,
// while the pool fills; the garbage collector reads what ipamd writes). Its admission
// is not registered: the pods are written before it starts, already resolved.
type world struct {
	pods    []Pod
	nodes   []*binaries.Ipamd
	webhook *binaries.Webhook
	// dir holds the nodes' run directories and logs.
	dir string
}

// readyTimeout bounds one ipamd's startup on a loaded shared machine.
const readyTimeout = 5 * time.Minute

// nodeName is the Node object of node n.
func (s Scenario) nodeName(n int) string { return fmt.Sprintf("%s-node-%d", s.Name, n) }

func (s Scenario) podName(i int) string { return fmt.Sprintf("pod-%d", i) }

// writer is a client without client-side rate limiting, to fill the API server fast.
func writer(env *testenv.Env) (client.Client, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return client.New(cfg, client.Options{Scheme: env.Scheme})
}

// setUp writes the scenario into the API server (namespace, pool, Node objects, pods
// bound to the nodes) and then starts one ipamd per node, so that every ipamd has its
// pods in its cache once ready, as a node's ipamd has by the time the kubelet runs the
// pod's sandbox.
func setUp(ctx context.Context, env *testenv.Env, bins binaries.Set, s Scenario) (w *world, err error) {
	c, err := writer(env)
	if err != nil {
		return nil, err
	}
	first, last, err := s.Range()
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Name}}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", s.Name, err)
	}
	// nicpool's own, for the webhook: an earlier scenario on this control plane may
	// have made it.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configs.DefaultNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, fmt.Errorf("create namespace %s: %w", configs.DefaultNamespace, err)
	}
	pool := &v2beta1.SpiderIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec:       v2beta1.IPPoolSpec{Subnet: s.Subnet.Masked().String(), IPs: []string{first.String() + "-" + last.String()}},
	}
	if err := c.Create(ctx, pool); err != nil {
		return nil, fmt.Errorf("create pool %s: %w", s.Name, err)
	}
	if err := inParallel(s.Nodes, func(n int) error {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.nodeName(n), Labels: map[string]string{corev1.LabelHostname: s.nodeName(n)}}}
		return c.Create(ctx, node)
	}); err != nil {
		return nil, fmt.Errorf("create nodes: %w", err)
	}
	selection := fmt.Sprintf(`[{"interface":"eth0","ipv4":[%q]}]`, s.Name)
	w = &world{pods: make([]Pod, s.Pods), nodes: make([]*binaries.Ipamd, s.Nodes)}
	if err := inParallel(s.Pods, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Name, Name: s.podName(i),
				Labels:      map[string]string{"app": s.Name},
				Annotations: map[string]string{annotations.IPPools: selection}},
			Spec: corev1.PodSpec{NodeName: s.nodeName(i % s.Nodes), Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if err := c.Create(ctx, p); err != nil {
			return fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		w.pods[i] = Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Node: i % s.Nodes}
		return nil
	}); err != nil {
		return nil, err
	}
	// A short directory: a unix socket's path must fit in 108 bytes.
	if w.dir, err = os.MkdirTemp("", "nicscale"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.tearDown()
		}
	}()
	if err := inParallel(s.Nodes, func(n int) error {
		dir := filepath.Join(w.dir, fmt.Sprint(n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
		d, err := binaries.StartIpamdWith(bins.Ipamd, env.Kubeconfig, s.nodeName(n), dir, binaries.IpamdOptions{Pprof: os.Getenv("NICPOOL_SCALE_PPROF") != "" || profilingAsked()})
		w.nodes[n] = d
		return err
	}); err != nil {
		return w, err
	}
	if err := inParallel(s.Nodes, func(n int) error { return w.nodes[n].WaitReady(readyTimeout) }); err != nil {
		return w, err
	}
	webhookDir := filepath.Join(w.dir, "webhook")
	if err := os.Mkdir(webhookDir, 0o700); err != nil {
		return w, err
	}
	// One replica, so no election: a replica that cannot renew its Lease in time exits
	// (its Deployment would restart it), which on a machine this loaded ends the run.
	if w.webhook, err = binaries.StartWebhook(bins.Webhook, env.Kubeconfig, webhookDir, binaries.WebhookOptions{Args: []string{"--leader-elect=false"}}); err != nil {
		return w, err
	}
	if err := w.webhook.WaitReady(readyTimeout); err != nil {
		return w, err
	}
	for _, d := range w.nodes {
		if d.Pprof != "" {
			// Now, not in the run's report: the profiles are read while it runs.
			fmt.Fprintf(os.Stderr, "%s: profiles on http://%s/debug/pprof/\n", d.Node, d.Pprof)
		}
	}
	return w, nil
}

// tearDown stops every ipamd and removes their directories.
func (w *world) tearDown() {
	var wg sync.WaitGroup
	for _, d := range w.nodes {
		if d != nil {
			wg.Go(func() { d.Stop(30 * time.Second) })
		}
	}
	if w.webhook != nil {
		wg.Go(func() { w.webhook.Stop(30 * time.Second) })
	}
	wg.Wait()
	if w.dir != "" && os.Getenv("NICPOOL_SCALE_KEEP_LOGS") == "" {
		_ = os.RemoveAll(w.dir)
	}
}

// ipamdCPU sums the CPU seconds the ipamd processes have used.
func (w *world) ipamdCPU() (float64, error) {
	var sum float64
	for _, d := range w.nodes {
		s, err := d.CPUSeconds()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", d.Name, err)
		}
		sum += s
	}
	return sum, nil
}

// peakMemory is the largest resident peak (VmHWM) among the ipamd processes.
func (w *world) peakMemory() (int64, error) {
	var peak int64
	for _, d := range w.nodes {
		m, err := d.Memory()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", d.Name, err)
		}
		peak = max(peak, m.HWM)
	}
	return peak, nil
}

// webhookCPU is the CPU seconds the webhook has used.
func (w *world) webhookCPU() (float64, error) {
	if err := w.webhook.Alive(); err != nil {
		return 0, err
	}
	return w.webhook.CPUSeconds()
}

// alive fails when an ipamd or the webhook has exited.
func (w *world) alive() error {
	errs := []error{w.webhook.Alive()}
	for _, d := range w.nodes {
		errs = append(errs, d.Alive())
	}
	return errors.Join(errs...)
}

// inParallel runs fn for 0..n-1 on a few workers and returns the first error; the
// rest of the work is skipped after it.
func inParallel(n int, fn func(int) error) error {
	const workers = 32
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		stop  = make(chan struct{})
	)
	for range min(workers, n) {
		wg.Go(func() {
			for k := range next {
				if err := fn(k); err != nil {
					once.Do(func() { first = err; close(stop) })
				}
			}
		})
	}
feed:
	for k := range n {
		select {
		case next <- k:
		case <-stop:
			break feed
		}
	}
	close(next)
	wg.Wait()
	return first
}
