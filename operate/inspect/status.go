package inspect

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// Components a status check concerns.
const (
	ComponentWebhook = "webhook"
	ComponentIpamd   = "ipamd"
	ComponentCNI     = "cni"
	ComponentPools   = "pools"
)

// Check is one finding of Status.
type Check struct {
	// Name names the check ("webhook-reachable", "ipamd/node-1", …).
	Name      string `json:"name"`
	Component string `json:"component"`
	// Node is the node the check concerns; empty for the cluster's components.
	Node string `json:"node,omitempty"`
	OK   bool   `json:"ok"`
	// Message says what was found.
	Message string `json:"message"`
	// Fix says what to do about a failed check.
	Fix string `json:"fix,omitempty"`
}

// StatusOptions say where nicpool runs and what counts as healthy.
type StatusOptions struct {
	// Namespace is nicpool's namespace (configs.DefaultNamespace when empty).
	Namespace string
	// LeaderLease is the webhook's leader election Lease (default "nicpool-webhook").
	LeaderLease string
	// CertSecret is the Secret holding the serving certificate (default
	// "nicpool-webhook-cert"); only its tls.crt is read.
	CertSecret string
	// CertMinValidity is how long the serving certificate must still be valid
	// (default 14 days).
	CertMinValidity time.Duration
	// PoolFullAt is the fraction of a pool's addresses in use at which it counts as
	// near exhaustion (default 0.9).
	PoolFullAt float64
	Now        time.Time
}

// Names of nicpool's workloads in its namespace, as the manifests deploy them.
const (
	webhookDeployment = "nicpool-webhook"
	ipamdDaemonSet    = "nicpool-ipamd"
	installCNI        = "install-cni"
)

func (o StatusOptions) withDefaults() StatusOptions {
	if o.Namespace == "" {
		o.Namespace = configs.DefaultNamespace
	}
	if o.LeaderLease == "" {
		o.LeaderLease = "nicpool-webhook"
	}
	if o.CertSecret == "" {
		o.CertSecret = "nicpool-webhook-cert"
	}
	if o.CertMinValidity == 0 {
		o.CertMinValidity = 14 * 24 * time.Hour
	}
	if o.PoolFullAt == 0 {
		o.PoolFullAt = 0.9
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	return o
}

// Status checks that nicpool is healthy: the webhook (configurations, caBundle,
// serving certificate, reachable through the API server, its Deployment, its
// leader), ipamd on every node that runs pods (its heartbeat Lease), the CNI
// binaries its DaemonSet installed on each node, and the pools' room. Every check
// that fails says how to fix it; a check the caller's rights do not allow says so and
// passes.
func Status(ctx context.Context, c client.Client, opts StatusOptions) ([]Check, error) {
	o := opts.withDefaults()
	var out []Check
	for _, f := range []func(context.Context, client.Client, StatusOptions) ([]Check, error){
		webhookConfigChecks, webhookReachable, webhookDeploymentChecks, webhookLeader, ipamdChecks, cniChecks, poolChecks,
	} {
		cs, err := f(ctx, c, o)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// Problems are the checks that failed.
func Problems(cs []Check) []Check {
	var out []Check
	for _, c := range cs {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

func ok(name, component, format string, args ...any) Check {
	return Check{Name: name, Component: component, OK: true, Message: fmt.Sprintf(format, args...)}
}

func problem(name, component, fix, format string, args ...any) Check {
	return Check{Name: name, Component: component, Message: fmt.Sprintf(format, args...), Fix: fix}
}

// notChecked passes a check the caller may not read, saying so.
func notChecked(name, component string, err error) Check {
	return ok(name, component, "not checked: %v", err)
}

func webhookConfigChecks(ctx context.Context, c client.Client, o StatusOptions) ([]Check, error) {
	const name = "webhook-configurations"
	fix := fmt.Sprintf("self-managed certificates: the webhook injects its CA when it starts (kubectl -n %s logs deploy/%s); cert-manager: check its cainjector and the Certificate of the webhook", o.Namespace, webhookDeployment)
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	var bundles = map[string][]byte{}
	if err := c.Get(ctx, client.ObjectKey{Name: configs.MutatingName}, m); err != nil {
		return []Check{configProblem(name, "MutatingWebhookConfiguration "+configs.MutatingName, err)}, nil
	}
	if err := c.Get(ctx, client.ObjectKey{Name: configs.ValidatingName}, v); err != nil {
		return []Check{configProblem(name, "ValidatingWebhookConfiguration "+configs.ValidatingName, err)}, nil
	}
	for _, w := range m.Webhooks {
		bundles["mutating webhook "+w.Name] = w.ClientConfig.CABundle
	}
	for _, w := range v.Webhooks {
		bundles["validating webhook "+w.Name] = w.ClientConfig.CABundle
	}
	var bad []string
	for _, k := range sortedKeys(bundles) {
		if _, err := parseCerts(bundles[k]); err != nil {
			bad = append(bad, k+": "+err.Error())
		}
	}
	if len(bad) > 0 {
		return []Check{problem("webhook-cabundle", ComponentWebhook, fix, "the CA is not injected: %s", strings.Join(bad, "; "))}, nil
	}
	cs := []Check{ok("webhook-cabundle", ComponentWebhook, "the CA is injected into all %d webhooks", len(bundles))}
	return append(cs, certificateCheck(ctx, c, o, m.Webhooks[0].ClientConfig.CABundle)), nil
}

func configProblem(name, what string, err error) Check {
	if apierrors.IsNotFound(err) {
		return problem(name, ComponentWebhook, "install nicpool (docs/install.md): its manifests register the webhooks", "%s does not exist: nicpool's admission is not installed", what)
	}
	if apierrors.IsForbidden(err) {
		return notChecked(name, ComponentWebhook, err)
	}
	return problem(name, ComponentWebhook, "check that the API server answers", "read %s: %v", what, err)
}

// certificateCheck reads the serving certificate (only tls.crt of its Secret) and
// checks that the injected CA signed it and that it stays valid long enough.
func certificateCheck(ctx context.Context, c client.Client, o StatusOptions, caBundle []byte) Check {
	const name = "webhook-certificate"
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.CertSecret}, sec); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return notChecked(name, ComponentWebhook, fmt.Errorf("the serving certificate's Secret %s/%s: %w", o.Namespace, o.CertSecret, err))
		}
		return problem(name, ComponentWebhook, "check that the API server answers", "read Secret %s/%s: %v", o.Namespace, o.CertSecret, err)
	}
	certs, err := parseCerts(sec.Data[corev1.TLSCertKey])
	if err != nil {
		return problem(name, ComponentWebhook, "self-managed certificates: delete the Secret and restart the webhook, which writes new ones; cert-manager: check the Certificate",
			"Secret %s/%s: tls.crt: %v", o.Namespace, o.CertSecret, err)
	}
	leaf := certs[0]
	pool := x509.NewCertPool()
	cas, _ := parseCerts(caBundle)
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	inter := x509.NewCertPool()
	for _, ic := range certs[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: o.Now}); err != nil {
		return problem(name, ComponentWebhook, "the webhook rotated its certificate and the CA was not injected again: restart the webhook (self-managed) or check cert-manager's cainjector",
			"the serving certificate (Secret %s/%s) does not verify against the injected caBundle: %v", o.Namespace, o.CertSecret, err)
	}
	left := leaf.NotAfter.Sub(o.Now)
	if left < o.CertMinValidity {
		return problem(name, ComponentWebhook, "self-managed certificates: the webhook's leader renews them (--cert-lookahead); restart it; cert-manager: check the Certificate's renewal",
			"the serving certificate expires %s (in %s, less than %s)", leaf.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Minute), o.CertMinValidity)
	}
	return ok(name, ComponentWebhook, "the serving certificate is signed by the injected CA and valid until %s (%d days)", leaf.NotAfter.UTC().Format(time.RFC3339), int(left.Hours()/24))
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// webhookReachable asks the API server to admit a SpiderIPPool in a dry run: it
// calls nicpool's pool webhooks as for any pool, and writes nothing.
func webhookReachable(ctx context.Context, c client.Client, o StatusOptions) ([]Check, error) {
	const name = "webhook-reachable"
	probe := &v2beta1.SpiderIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "nicpool-status-probe-" + rand.String(5)},
		Spec:       v2beta1.IPPoolSpec{Subnet: "192.0.2.0/24", IPs: []string{"192.0.2.10"}},
	}
	err := c.Create(ctx, probe, client.DryRunAll)
	switch {
	case err == nil:
		return []Check{ok(name, ComponentWebhook, "the API server calls nicpool-webhook: a SpiderIPPool was admitted (dry run)")}, nil
	case apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "webhook"):
		return []Check{notChecked(name, ComponentWebhook, fmt.Errorf("a dry-run SpiderIPPool create: %w", err))}, nil
	case strings.Contains(err.Error(), "denied the request"):
		return []Check{ok(name, ComponentWebhook, "the API server calls nicpool-webhook: it answered a dry-run SpiderIPPool (%v)", err)}, nil
	}
	return []Check{problem(name, ComponentWebhook,
		fmt.Sprintf("start nicpool-webhook or see why it does not serve: kubectl -n %s get pods -l app.kubernetes.io/name=nicpool-webhook; kubectl -n %s logs deploy/%s; until then pods that select pools and StatefulSet pods are refused", o.Namespace, o.Namespace, webhookDeployment),
		"the API server cannot call nicpool-webhook: %v", err)}, nil
}

func webhookDeploymentChecks(ctx context.Context, c client.Client, o StatusOptions) ([]Check, error) {
	const name = "webhook-deployment"
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: webhookDeployment}, d); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, nil // not deployed as the manifests deploy it: reachability says it all
		}
		return nil, fmt.Errorf("read Deployment %s/%s: %w", o.Namespace, webhookDeployment, err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ReadyReplicas == 0 {
		return []Check{problem(name, ComponentWebhook, fmt.Sprintf("kubectl -n %s describe deploy/%s; kubectl -n %s logs deploy/%s", o.Namespace, webhookDeployment, o.Namespace, webhookDeployment),
			"Deployment %s/%s has no ready replica (of %d)", o.Namespace, webhookDeployment, want)}, nil
	}
	return []Check{ok(name, ComponentWebhook, "Deployment %s/%s: %d of %d replicas ready", o.Namespace, webhookDeployment, d.Status.ReadyReplicas, want)}, nil
}

// webhookLeader checks the webhook's leader election Lease: one replica runs the
// garbage collector, the pool counts and the capacity metrics.
func webhookLeader(ctx context.Context, c client.Client, o StatusOptions) ([]Check, error) {
	const name = "webhook-leader"
	l := &coordinationv1.Lease{}
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.LeaderLease}, l)
	if apierrors.IsForbidden(err) {
		return []Check{notChecked(name, ComponentWebhook, err)}, nil
	}
	if apierrors.IsNotFound(err) {
		d := &appsv1.Deployment{}
		if derr := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: webhookDeployment}, d); derr == nil && leaderElects(d) {
			return []Check{problem(name, ComponentWebhook, fmt.Sprintf("kubectl -n %s logs deploy/%s (a replica that cannot take the Lease says why)", o.Namespace, webhookDeployment),
				"no replica of nicpool-webhook has ever led (no Lease %s/%s): garbage collection, pool counts and capacity metrics do not run", o.Namespace, o.LeaderLease)}, nil
		}
		return []Check{ok(name, ComponentWebhook, "leader election is off (no Lease %s/%s): the webhook's one replica runs the controllers", o.Namespace, o.LeaderLease)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Lease %s/%s: %w", o.Namespace, o.LeaderLease, err)
	}
	holder, fresh, when := leaseState(l, o.Now)
	if holder == "" || !fresh {
		return []Check{problem(name, ComponentWebhook, fmt.Sprintf("kubectl -n %s get pods -l app.kubernetes.io/name=nicpool-webhook; kubectl -n %s logs deploy/%s", o.Namespace, o.Namespace, webhookDeployment),
			"no replica of nicpool-webhook leads (Lease %s/%s last renewed %s): garbage collection, pool counts and capacity metrics do not run", o.Namespace, o.LeaderLease, when)}, nil
	}
	return []Check{ok(name, ComponentWebhook, "%s leads (Lease %s/%s renewed %s)", holder, o.Namespace, o.LeaderLease, when)}, nil
}

func leaderElects(d *appsv1.Deployment) bool {
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if slices.ContainsFunc(ctr.Args, func(a string) bool { return a == "--leader-elect" || a == "--leader-elect=true" }) {
			return true
		}
	}
	return false
}

// leaseState is a Lease's holder, whether it is within its duration, and when it
// was last renewed, in words.
func leaseState(l *coordinationv1.Lease, now time.Time) (holder string, fresh bool, when string) {
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime == nil {
		return holder, false, "never"
	}
	renewed := l.Spec.RenewTime.Time
	dur := time.Duration(0)
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return holder, now.Before(renewed.Add(dur)), fmt.Sprintf("%s ago", now.Sub(renewed).Round(time.Second))
}

// ipamdChecks checks every node that runs pods on a pod network, and every node with
// a heartbeat, for an ipamd that serves (its heartbeat Lease held and fresh).
func ipamdChecks(ctx context.Context, c client.Client, o StatusOptions) ([]Check, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		if apierrors.IsForbidden(err) {
			return []Check{notChecked("ipamd", ComponentIpamd, err)}, nil
		}
		return nil, fmt.Errorf("list pods: %w", err)
	}
	running := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		running[p.Spec.NodeName]++
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(o.Namespace), client.MatchingLabels{"app.kubernetes.io/name": "nicpool-ipamd"}); err != nil {
		if apierrors.IsForbidden(err) {
			return []Check{notChecked("ipamd", ComponentIpamd, err)}, nil
		}
		return nil, fmt.Errorf("list Leases: %w", err)
	}
	byNode := map[string]*coordinationv1.Lease{}
	for i := range leases.Items {
		byNode[leases.Items[i].Name] = &leases.Items[i]
	}
	nodes := map[string]bool{}
	for n := range running {
		nodes[n] = true
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			nodes[*l.Spec.HolderIdentity] = true
		}
	}
	var out []Check
	for _, n := range sortedKeys(nodes) {
		name := "ipamd/" + n
		fix := fmt.Sprintf("kubectl -n %s get pods -l app.kubernetes.io/name=nicpool-ipamd --field-selector spec.nodeName=%s; kubectl -n %s logs ds/%s (its pod on %s); pods starting on %s wait until ipamd serves", o.Namespace, n, o.Namespace, ipamdDaemonSet, n, n)
		l := byNode[daemon.LeaseName(n)]
		var ck Check
		switch {
		case l == nil:
			ck = problem(name, ComponentIpamd, fix, "no ipamd has served node %s (no heartbeat Lease %s/%s); it runs %s", n, o.Namespace, daemon.LeaseName(n), Plural(running[n], "pod"))
		default:
			holder, fresh, when := leaseState(l, o.Now)
			switch {
			case holder == "":
				ck = problem(name, ComponentIpamd, fix, "ipamd on node %s stopped (released its heartbeat %s); the node runs %s", n, when, Plural(running[n], "pod"))
			case !fresh:
				ck = problem(name, ComponentIpamd, fix, "ipamd on node %s does not serve (heartbeat last renewed %s); the node runs %s", n, when, Plural(running[n], "pod"))
			default:
				ck = ok(name, ComponentIpamd, "ipamd serves node %s with its caches synced (heartbeat renewed %s); it runs %s", n, when, Plural(running[n], "pod"))
			}
		}
		ck.Node = n
		out = append(out, ck)
	}
	return out, nil
}

// cniChecks checks, on each node the ipamd DaemonSet runs on, that its init container
// installed the CNI plugin from the image the DaemonSet installs now.
func cniChecks(ctx context.Context, c client.Client, o StatusOptions) ([]Check, error) {
	ds := &appsv1.DaemonSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: ipamdDaemonSet}, ds); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return []Check{notChecked("cni", ComponentCNI, fmt.Errorf("no DaemonSet %s/%s installs the CNI plugin here: %w", o.Namespace, ipamdDaemonSet, err))}, nil
		}
		return nil, fmt.Errorf("read DaemonSet %s/%s: %w", o.Namespace, ipamdDaemonSet, err)
	}
	want := initImage(&ds.Spec.Template.Spec)
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("DaemonSet %s/%s: selector: %w", o.Namespace, ipamdDaemonSet, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list ipamd pods: %w", err)
	}
	var out []Check
	for _, p := range pods.Items {
		n := p.Spec.NodeName
		name := "cni/" + n
		fix := fmt.Sprintf("kubectl -n %s logs pod/%s -c %s; kubectl -n %s delete pod/%s installs it again", o.Namespace, p.Name, installCNI, o.Namespace, p.Name)
		var st *corev1.ContainerStatus
		for i := range p.Status.InitContainerStatuses {
			if p.Status.InitContainerStatuses[i].Name == installCNI {
				st = &p.Status.InitContainerStatuses[i]
			}
		}
		var ck Check
		switch got := initImage(&p.Spec); {
		case st == nil || st.State.Terminated == nil:
			ck = problem(name, ComponentCNI, fix, "the CNI plugin is not installed on node %s yet (pod %s: init container %s has not finished)", n, p.Name, installCNI)
		case st.State.Terminated.ExitCode != 0:
			ck = problem(name, ComponentCNI, fix, "installing the CNI plugin on node %s failed (pod %s: %s exited %d: %s)", n, p.Name, installCNI, st.State.Terminated.ExitCode, st.State.Terminated.Message)
		case got != want:
			ck = problem(name, ComponentCNI, fmt.Sprintf("the DaemonSet's rollout replaces it: kubectl -n %s rollout status ds/%s", o.Namespace, ipamdDaemonSet),
				"node %s runs the CNI plugin of %s; the DaemonSet installs %s", n, got, want)
		default:
			ck = ok(name, ComponentCNI, "the CNI plugin of %s is installed on node %s", got, n)
		}
		ck.Node = n
		out = append(out, ck)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func initImage(s *corev1.PodSpec) string {
	for _, c := range s.InitContainers {
		if c.Name == installCNI {
			return c.Image
		}
	}
	return ""
}

// poolChecks flags every enabled pool with addresses that is near exhaustion, and
// every pool whose addresses cannot be counted.
func poolChecks(ctx context.Context, c client.Client, o StatusOptions) ([]Check, error) {
	reps, err := Pools(ctx, c)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return []Check{notChecked("pools", ComponentPools, err)}, nil
		}
		return nil, err
	}
	var out []Check
	for _, p := range reps {
		switch {
		case p.Error != "":
			out = append(out, problem("pool/"+p.Name, ComponentPools, "correct the pool's spec (kubectl edit sp "+p.Name+")", "pool %s: %s", p.Name, p.Error))
		case p.Disabled || p.Terminating || p.Total == 0:
		case float64(p.Total-p.Free) >= o.PoolFullAt*float64(p.Total):
			out = append(out, problem("pool/"+p.Name, ComponentPools, fmt.Sprintf("add addresses to spec.ips of pool %s (kubectl edit sp %s), or free some: kubectl nicpool check finds records of pods that are gone", p.Name, p.Name),
				"pool %s is near exhaustion: %d of %d addresses in use, %d free", p.Name, p.Total-p.Free, p.Total, p.Free))
		}
	}
	if len(out) == 0 {
		out = append(out, ok("pools", ComponentPools, "%d pools, none %d%% full", len(reps), int(o.PoolFullAt*100)))
	}
	return out, nil
}

// Plural counts n of what in words: "1 pod", "3 pods" (what takes an s).
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
