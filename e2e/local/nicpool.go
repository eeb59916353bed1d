package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/manifests"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// nicpoolCommands are built from this checkout for every run, with the CNI plugin
// pair (binaries.BuildPlugin), so the stack never runs a stale binary.
var nicpoolCommands = []string{"nicpool-ipamd", "nicpool-webhook"}

// cniPlugins are the tools of bin/ the nodes' Multus delegates to.
var cniPlugins = []string{"multus", "macvlan", "bridge"}

// buildNicpool builds nicpool's binaries into Dir/bin beside links to the CNI
// plugins, the one directory the nodes' Multus finds every plugin in: the plugin's
// front as nicpool with nicpool-cni, which it execs, beside it.
func (s *Stack) buildNicpool(ctx context.Context) error {
	s.binDir = filepath.Join(s.Dir, "bin")
	if err := os.MkdirAll(s.binDir, 0o755); err != nil {
		return err
	}
	if s.source.Root != "" {
		// Another checkout (an earlier release's): built as shipped.
		var pkgs []string
		for _, c := range nicpoolCommands {
			pkgs = append(pkgs, "./cmd/"+c)
		}
		if err := binaries.GoBuild(s.source, s.binDir, pkgs...); err != nil {
			return err
		}
	} else {
		// Stamped with the version make build stamps into kubectl-nicpool, so that
		// `kubectl nicpool version` finds one version in the local cluster.
		args := []string{"build", "-ldflags=" + binaries.LDFlags(), "-o", s.binDir + "/"}
		for _, c := range nicpoolCommands {
			args = append(args, "./cmd/"+c)
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = testenv.RepoRoot()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build nicpool: %w\n%s", err, out.String())
		}
	}
	if _, err := binaries.BuildPluginFrom(s.source, s.binDir); err != nil {
		return err
	}
	for _, p := range cniPlugins {
		link := filepath.Join(s.binDir, p)
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(testenv.BinDir(), p), link); err != nil {
			return err
		}
	}
	// The plugin also serves networks written for spiderpool, as ipamd's DaemonSet
	// installs the front under that name too (the link's target is the front's file,
	// so nicpool-cni is beside the executable it runs as).
	link := filepath.Join(s.binDir, cniplugin.NameSpiderpool)
	_ = os.Remove(link)
	return os.Symlink(cniplugin.Name, link)
}

// Service accounts of the manifests, whose RBAC the local components run under.
const (
	webhookServiceAccount = "nicpool-webhook"
	ipamdServiceAccount   = "nicpool-ipamd"
)

// accessKinds are the objects of the manifests that say who may do what; the local
// stack applies them and runs ipamd and the webhook under exactly that RBAC and those
// admission policies.
var accessKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "Secret": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// applyAccess creates nicpool's namespace, service accounts, RBAC, admission policies
// and certificate Secret as the self-managed overlay of manifests/ renders them.
func (s *Stack) applyAccess(ctx context.Context) error {
	objs, err := manifests.Render(filepath.Join(testenv.RepoRoot(), "manifests", "overlays", "self-managed"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		if !accessKinds[o.GetKind()] {
			continue
		}
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("manifests: create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// startWebhook runs nicpool-webhook with self-managed certificates and registers the
// same webhook configurations as the manifests, pointed at it on loopback instead of
// at a Service (there is no kube-proxy here).
func (s *Stack) startWebhook(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	probe, err := freePort()
	if err != nil {
		return err
	}
	s.webhookPort, s.webhookProbe = port, probe
	if s.install != nil {
		return s.startInstalledWebhook(ctx)
	}
	if err := s.applyAccess(ctx); err != nil {
		return err
	}
	mutating, validating := configs.Configurations(configs.Options{})
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig = urlClientConfig(port, mutating.Webhooks[i].ClientConfig)
	}
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig = urlClientConfig(port, validating.Webhooks[i].ClientConfig)
	}
	if err := s.Client.Create(ctx, mutating); err != nil {
		return err
	}
	if err := s.Client.Create(ctx, validating); err != nil {
		return err
	}
	return s.runWebhook(ctx)
}

// runWebhook starts the nicpool-webhook process on the ports startWebhook chose and
// waits until it serves.
func (s *Stack) runWebhook(ctx context.Context) error {
	if s.install != nil {
		return s.runInstalledWebhook(ctx)
	}
	port, probe := s.webhookPort, s.webhookProbe
	kc, err := s.ServiceAccountKubeconfig(configs.DefaultNamespace, webhookServiceAccount)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "webhook")
	// The certificate keeper writes into the directory but does not create it.
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		return err
	}
	p, err := cluster.StartProcess("nicpool-webhook", filepath.Join(s.binDir, "nicpool-webhook"), []string{
		"--kubeconfig=" + kc,
		"--namespace=" + configs.DefaultNamespace,
		"--self-managed-certs",
		"--cert-extra-dns-names=localhost",
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(port),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
		"--metrics-bind-address=0",
		// The nodes' cluster network (eth0) has nicpool as its IPAM.
		"--cluster-network-nicpool",
		// Short enough that a spec sees garbage collected within its timeout.
		"--gc-interval=10s",
		"--gc-min-age=5s",
	}, filepath.Join(dir, "webhook.log"))
	if err != nil {
		return err
	}
	s.Webhook = p
	return s.waitWebhook(ctx, p, probe)
}

func urlClientConfig(port int, c admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	url := fmt.Sprintf("https://localhost:%d%s", port, *c.Service.Path)
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: c.CABundle}
}

// waitWebhook waits until the webhook reports ready and its CA is injected into both
// configurations, after which the API server can call it.
func (s *Stack) waitWebhook(ctx context.Context, p *cluster.Process, probe int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("nicpool-webhook exited: see %s", p.Log)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet: polled again
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		return s.webhookCAInjected(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("wait for nicpool-webhook: %w (log %s)", err, p.Log)
	}
	return nil
}

// webhookCAInjected says whether both webhook configurations carry the webhook's CA,
// after which the API server can call it.
func (s *Stack) webhookCAInjected(ctx context.Context) bool {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if s.Client.Get(ctx, nameOf(configs.MutatingName), m) != nil || s.Client.Get(ctx, nameOf(configs.ValidatingName), v) != nil {
		return false
	}
	for _, w := range m.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return false
		}
	}
	for _, w := range v.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return false
		}
	}
	return true
}

// startIpamd runs one node's nicpool-ipamd, serving the node's socket, and waits
// until it answers. Its credentials are a token of its service account bound to its
// Node, so that the API server's policies know which node it writes for, as with the
// token the DaemonSet's pod gets.
func (s *Stack) startIpamd(ctx context.Context, nodeName, dir, runDir string) (*cluster.Process, error) {
	if s.install != nil {
		return s.startInstalledIpamd(ctx, nodeName, dir, runDir)
	}
	kc, err := s.NodeTokenKubeconfig(ctx, configs.DefaultNamespace, ipamdServiceAccount, nodeName)
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(runDir, filepath.Base(api.DefaultSocketPath))
	p, err := cluster.StartProcess("nicpool-ipamd "+nodeName, filepath.Join(s.binDir, "nicpool-ipamd"), []string{
		"--node-name=" + nodeName,
		"--socket=" + socket,
		// Where the node's plugins see spiderpool's agent socket (node.SpidernetDir),
		// which spiderpool's coordinator plugin asks, as the manifests have it.
		"--spiderpool-socket=" + filepath.Join(dir, "spidernet", "run", filepath.Base(coordinator.DefaultSocketPath)),
		"--kubeconfig=" + kc,
		"--multus-cluster-network=" + ClusterNetworkNAD,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	}, filepath.Join(dir, "ipamd.log"))
	if err != nil {
		return nil, err
	}
	return p, waitSocket(ctx, p, socket)
}

// waitSocket waits until ipamd answers /healthz on its socket.
func waitSocket(ctx context.Context, p *cluster.Process, socket string) error {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}, Timeout: 2 * time.Second}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("%s exited: see %s", p.Name, p.Log)
		default:
		}
		resp, err := c.Get("http://ipamd" + api.PathHealthz)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet: polled again
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s: %w (log %s)", p.Name, err, p.Log)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func nameOf(name string) types.NamespacedName { return types.NamespacedName{Name: name} }

// StopWebhook stops nicpool-webhook (SIGTERM, then SIGKILL after grace), as when
// every replica of its Deployment is down; its configurations and policies stay.
func (s *Stack) StopWebhook(grace time.Duration) error {
	if s.Webhook == nil {
		return errors.New("nicpool-webhook is not running")
	}
	err := s.Webhook.Stop(grace)
	s.Webhook = nil
	return err
}

// StartWebhook starts nicpool-webhook again after StopWebhook and waits until it
// serves.
func (s *Stack) StartWebhook(ctx context.Context) error {
	if s.Webhook != nil {
		return errors.New("nicpool-webhook is running")
	}
	return s.runWebhook(ctx)
}

// StopIpamd stops a node's ipamd (SIGTERM, then SIGKILL after grace), as when its
// DaemonSet pod dies; KillIpamd is the crash.
func (s *Stack) StopIpamd(node string, grace time.Duration) error {
	p, ok := s.ipamd[node]
	if !ok {
		return fmt.Errorf("no ipamd on node %s", node)
	}
	return p.Stop(grace)
}

// PauseIpamd stops a node's ipamd with SIGSTOP: its socket still accepts connections
// and nothing answers them, as with a deadlocked or thrashing daemon. ResumeIpamd
// (SIGCONT) lets it go on.
func (s *Stack) PauseIpamd(node string) error { return s.signalIpamd(node, syscall.SIGSTOP) }

// ResumeIpamd undoes PauseIpamd.
func (s *Stack) ResumeIpamd(node string) error { return s.signalIpamd(node, syscall.SIGCONT) }

func (s *Stack) signalIpamd(node string, sig syscall.Signal) error {
	p, ok := s.ipamd[node]
	if !ok {
		return fmt.Errorf("no ipamd on node %s", node)
	}
	if err := syscall.Kill(p.Pid(), sig); err != nil {
		return fmt.Errorf("%v ipamd on node %s: %w", sig, node, err)
	}
	return nil
}

// IpamdPid is the process id of a node's ipamd, while that process runs: a spec
// compares it before and after to show ipamd was not restarted, and reads its memory
// from /proc.
func (s *Stack) IpamdPid(node string) (int, error) {
	p, ok := s.ipamd[node]
	if !ok {
		return 0, fmt.Errorf("no ipamd on node %s", node)
	}
	select {
	case <-p.Exited():
		return 0, fmt.Errorf("ipamd on node %s has exited: see %s", node, p.Log)
	default:
	}
	return p.Pid(), nil
}

// StartIpamd (re)starts a node's ipamd and waits until it serves.
func (s *Stack) StartIpamd(ctx context.Context, node string) error {
	if p, ok := s.ipamd[node]; ok {
		select {
		case <-p.Exited():
		default:
			return fmt.Errorf("ipamd on node %s is running", node)
		}
	}
	dir := filepath.Join(s.Dir, "nodes", node)
	p, err := s.startIpamd(ctx, node, dir, filepath.Join(dir, "run"))
	if p != nil {
		s.ipamd[node] = p
	}
	return err
}

func (s *Stack) stopNicpool() error {
	var errs []error
	for name, p := range s.ipamd {
		errs = append(errs, p.Stop(10*time.Second))
		delete(s.ipamd, name)
	}
	if s.Webhook != nil {
		errs = append(errs, s.Webhook.Stop(10*time.Second))
		s.Webhook = nil
	}
	return errors.Join(errs...)
}
