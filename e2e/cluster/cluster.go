package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// Controllers are the kube-controller-manager controllers the suite relies on: pods
// come from Deployments, StatefulSets and Jobs, owners cascade, namespaces empty out.
var Controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"job-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"ttl-after-finished-controller",
	// Type-checks ValidatingAdmissionPolicies (nicpool's are checked by the suite).
	"validatingadmissionpolicy-status-controller",
	// Fills the aggregated roles (view, edit, admin), which nicpool-view joins, as
	// every cluster does.
	"clusterrole-aggregation-controller",
}

// Options tune the cluster.
type Options struct {
	// Dir holds kubeconfigs and component logs; a new temporary directory when empty.
	Dir string
	// Kubeconfig, when set, is where the admin kubeconfig is also written
	// (`make run` writes .local/kubeconfig).
	Kubeconfig string
	// APIServerArgs are extra kube-apiserver flags.
	APIServerArgs map[string][]string
	// ExtraCRDs are installed beside nicpool's and the NetworkAttachmentDefinition CRD.
	ExtraCRDs []*apiextensionsv1.CustomResourceDefinition
	// ServingAddresses are addresses the API server's certificate names besides
	// localhost: where pods reach it (the `kubernetes` Service's ClusterIP). Such an
	// API server (real nodes) also logs to Dir/kube-apiserver.log.
	ServingAddresses []string
	// ExtraControllers run in kube-controller-manager beside Controllers.
	ExtraControllers []string
	// ControllerManagerArgs are extra kube-controller-manager flags.
	ControllerManagerArgs []string
}

// Cluster is a running control plane with controllers and a scheduler.
type Cluster struct {
	*testenv.Env
	// Clientset is a typed client for core resources (events, status subresources).
	Clientset *kubernetes.Clientset
	// Dir holds kubeconfigs and logs.
	Dir string
	// AdminKubeconfig is the admin kubeconfig inside Dir.
	AdminKubeconfig string

	processes []*Process
	ownDir    bool
	opts      Options
	// apiLog is kube-apiserver's log file, when it has one (ServingAddresses).
	apiLog *os.File
}

// Start brings up etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
// On error everything already started is stopped again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if err := SweepProcesses(); err != nil {
		return nil, err
	}
	c = &Cluster{Dir: opts.Dir, opts: opts}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "nicpool-cluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(testenv.BinDir(), name)); err != nil {
			return c, fmt.Errorf("%s missing in %s: run `make tools` first: %w", name, testenv.BinDir(), err)
		}
	}
	var configure func(*envtest.APIServer) error
	if len(opts.ServingAddresses) > 0 {
		configure = func(api *envtest.APIServer) error {
			// Its log, kept with the others (a restarted one appends).
			log, err := os.OpenFile(filepath.Join(c.Dir, "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return err
			}
			c.apiLog = log
			api.Out, api.Err = log, log
			return servingCertificate(api, filepath.Join(c.Dir, "apiserver"), opts.ServingAddresses)
		}
	}
	c.Env, err = testenv.Start(testenv.Options{
		ConfigureAPIServer: configure,
		APIServerArgs:      opts.APIServerArgs,
		ExtraCRDs:          append([]*apiextensionsv1.CustomResourceDefinition{NetworkAttachmentDefinitionCRD()}, opts.ExtraCRDs...),
	})
	if err != nil {
		return c, err
	}
	if err := nadv1.AddToScheme(c.Scheme); err != nil {
		return c, err
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return c, err
	}
	if c.AdminKubeconfig, err = c.writeKubeconfig("admin", envtest.User{Name: "nicpool-admin", Groups: []string{"system:masters"}}); err != nil {
		return c, err
	}
	if opts.Kubeconfig != "" {
		if err := copyFile(c.AdminKubeconfig, opts.Kubeconfig); err != nil {
			return c, err
		}
	}
	if err := c.startControllerManager(); err != nil {
		return c, err
	}
	if err := c.startScheduler(); err != nil {
		return c, err
	}
	if err := recordChildren(); err != nil {
		return c, err
	}
	return c, c.waitControllers(ctx)
}

// UserKubeconfig writes a kubeconfig for a user into Dir/<file>.kubeconfig and
// returns its path.
func (c *Cluster) UserKubeconfig(file, user string, groups ...string) (string, error) {
	return c.writeKubeconfig(file, envtest.User{Name: user, Groups: groups})
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as a service
// account (its user name and groups), so RBAC bound to the ServiceAccount applies
// to a component run outside a pod.
func (c *Cluster) ServiceAccountKubeconfig(namespace, name string) (string, error) {
	return c.UserKubeconfig(name, "system:serviceaccount:"+namespace+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
}

// Credentials provisions a user and returns its client certificate and key (PEM),
// for components that take them rather than a kubeconfig file.
func (c *Cluster) Credentials(user string, groups ...string) (cert, key []byte, err error) {
	u, err := c.Env.Env.ControlPlane.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("add user %s: %w", user, err)
	}
	cfg := u.Config()
	return cfg.CertData, cfg.KeyData, nil
}

// CA is the certificate authority of the API server's serving certificate (PEM).
func (c *Cluster) CA() []byte { return c.Config.CAData }

func (c *Cluster) writeKubeconfig(file string, u envtest.User) (string, error) {
	user, err := c.Env.Env.ControlPlane.AddUser(u, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", u.Name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, file+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

func (c *Cluster) startControllerManager() error {
	// The controller manager acts as one privileged identity rather than one service
	// account per controller: fewer moving parts, same controllers.
	kc, err := c.writeKubeconfig("kube-controller-manager", envtest.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}})
	if err != nil {
		return err
	}
	ca := filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(ca, c.Config.CAData, 0o644); err != nil {
		return err
	}
	// envtest generates the service-account signing key pair next to the API
	// server's certificates; the token controller must sign with the same key.
	saKey := filepath.Join(c.Env.Env.ControlPlane.APIServer.CertDir, "sa-signer.key")
	args := []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--controllers=" + strings.Join(append(slices.Clone(Controllers), c.opts.ExtraControllers...), ","),
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + ca,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--concurrent-statefulset-syncs=10",
	}
	return c.start("kube-controller-manager", append(args, c.opts.ControllerManagerArgs...))
}

func (c *Cluster) startScheduler() error {
	kc, err := c.writeKubeconfig("kube-scheduler", envtest.User{Name: "system:kube-scheduler", Groups: []string{"system:masters"}})
	if err != nil {
		return err
	}
	return c.start("kube-scheduler", []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	})
}

func (c *Cluster) start(name string, args []string) error {
	p, err := StartProcess(name, filepath.Join(testenv.BinDir(), name), args, filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err
	}
	c.processes = append(c.processes, p)
	return nil
}

// waitControllers waits until the controller manager has created the default
// service account, the first sign that its controllers run.
func (c *Cluster) waitControllers(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.processes {
			select {
			case <-p.Exited():
				return false, fmt.Errorf("%s exited early: see %s", p.Name, p.Log)
			default:
			}
		}
		sa := &corev1.ServiceAccount{}
		return c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "default"}, sa) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for kube-controller-manager: %w", err)
	}
	return nil
}

// Logs are the log files of the controller manager and scheduler.
func (c *Cluster) Logs() []string {
	var out []string
	for _, p := range c.processes {
		out = append(out, p.Log)
	}
	return out
}

// Stop stops the scheduler, the controller manager and the control plane. It is safe
// to call on a partly started cluster and more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.processes) - 1; i >= 0; i-- {
		errs = append(errs, c.processes[i].Stop(15*time.Second))
	}
	c.processes = nil
	if c.Env != nil {
		errs = append(errs, c.Env.Stop())
		forgetChildren()
	}
	if c.apiLog != nil {
		_ = c.apiLog.Close()
		c.apiLog = nil
	}
	if c.ownDir {
		errs = append(errs, os.RemoveAll(c.Dir))
		c.ownDir = false
	}
	return errors.Join(errs...)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}

// CrashAPIServer kills kube-apiserver with SIGKILL, as a crash would, and starts it
// again on the same address with the same certificates and users; it returns once
// the new one serves.
func (c *Cluster) CrashAPIServer(ctx context.Context) error {
	api := c.Env.Env.ControlPlane.APIServer
	pid := childNamed("kube-apiserver")
	if pid == 0 {
		return errors.New("no kube-apiserver child process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		// Gone, or its pid already reused by a process that is not our child.
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || ParentOf(pid) != os.Getpid(), nil
	}); err != nil {
		return fmt.Errorf("kube-apiserver %d survived SIGKILL: %w", pid, err)
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return recordChildren()
}
