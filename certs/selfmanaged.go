package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Permissions of the self-managed mode: its Secret (a Role in nicpool's namespace
// only) and the caBundle of nicpool's two webhook configurations.
//
// +kubebuilder:rbac:groups="",namespace=nicpool-system,resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;update;patch

// Options of the self-managed mode.
type Options struct {
	// Namespace and SecretName locate the Secret holding the CA and the serving
	// certificate (created empty when missing).
	Namespace, SecretName string
	// DNSName is the name the API server reaches the webhook by:
	// <service>.<namespace>.svc. ExtraDNSNames are added to the certificate.
	DNSName       string
	ExtraDNSNames []string
	// MutatingWebhooks and ValidatingWebhooks are the configurations whose
	// clientConfig.caBundle is kept equal to the CA.
	MutatingWebhooks, ValidatingWebhooks []string
	// CertDir receives tls.crt, tls.key and ca.crt on every change; empty: none.
	CertDir string
	// CAValidity and CertValidity are how long a new CA and a new serving
	// certificate are valid; Lookahead is how long before expiry each is replaced;
	// CheckInterval is how often that is checked. Zero means cert-controller's
	// defaults (10 years, 1 year, 90 days, 12 hours).
	CAValidity, CertValidity, Lookahead, CheckInterval time.Duration
	// LeaderElection makes only the elected replica generate and inject; every
	// replica's Keeper still serves the Secret's certificate.
	LeaderElection bool
	// RotatorName names the rotating controller (default nicpool-cert-rotator):
	// controller names are unique in a process, so a test running two replicas in
	// one process names them apart.
	RotatorName string
}

// Keeper holds the serving certificate currently in the Secret.
type Keeper struct {
	cert    atomic.Pointer[tls.Certificate]
	certDir string
}

// NewKeeper returns a Keeper with no certificate yet.
func NewKeeper() *Keeper { return &Keeper{} }

// TLSOption makes a TLS server present the Keeper's current certificate: give it to
// webhook.Options.TLSOpts. Rotation takes effect on the next handshake.
func (k *Keeper) TLSOption(c *tls.Config) {
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if cert := k.cert.Load(); cert != nil {
			return cert, nil
		}
		return nil, errors.New("no serving certificate yet: the self-managed certificate Secret is not populated")
	}
}

// Current returns the certificate being served, or nil.
func (k *Keeper) Current() *x509.Certificate {
	if c := k.cert.Load(); c != nil {
		return c.Leaf
	}
	return nil
}

// Checker is a readiness check that passes once a certificate is served.
func (k *Keeper) Checker(*http.Request) error {
	if k.cert.Load() == nil {
		return errors.New("no serving certificate yet")
	}
	return nil
}

// Setup adds the self-managed mode to mgr: the cert-controller rotator (generation,
// Secret, caBundle injection, rotation) and the Keeper's watch of the Secret.
func Setup(ctx context.Context, mgr manager.Manager, k *Keeper, o Options) error {
	if err := ensureSecret(ctx, mgr, o); err != nil {
		return err
	}
	var hooks []rotator.WebhookInfo
	for _, n := range o.MutatingWebhooks {
		hooks = append(hooks, rotator.WebhookInfo{Name: n, Type: rotator.Mutating})
	}
	for _, n := range o.ValidatingWebhooks {
		hooks = append(hooks, rotator.WebhookInfo{Name: n, Type: rotator.Validating})
	}
	certDir := o.CertDir
	if certDir == "" {
		// cert-controller waits for the certificate file to appear; give it a
		// private directory when the caller wants none.
		d, err := os.MkdirTemp("", "nicpool-webhook-certs-")
		if err != nil {
			return err
		}
		certDir = d
	}
	k.certDir = certDir
	name := o.RotatorName
	if name == "" {
		name = "nicpool-cert-rotator"
	}
	r := &rotator.CertRotator{
		SecretKey:              types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:                certDir,
		CAName:                 "nicpool-webhook-ca",
		CAOrganization:         "nicpool",
		DNSName:                o.DNSName,
		ExtraDNSNames:          o.ExtraDNSNames,
		IsReady:                make(chan struct{}),
		Webhooks:               hooks,
		FieldOwner:             "nicpool-webhook",
		RequireLeaderElection:  o.LeaderElection,
		CaCertDuration:         o.CAValidity,
		ServerCertDuration:     o.CertValidity,
		LookaheadInterval:      o.Lookahead,
		RotationCheckFrequency: o.CheckInterval,
		ControllerName:         name,
	}
	if err := rotator.AddRotator(mgr, r); err != nil {
		return fmt.Errorf("self-managed certificates: %w", err)
	}
	return k.watch(ctx, mgr, o)
}

// ensureSecret creates the empty Secret cert-controller fills, unless it exists.
func ensureSecret(ctx context.Context, mgr manager.Manager, o Options) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.SecretName, Labels: map[string]string{"app.kubernetes.io/part-of": "nicpool"}}}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create certificate Secret %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	return nil
}

// watch feeds the Keeper from a cache that sees only the certificate Secret, so the
// webhook needs no access to other Secrets.
func (k *Keeper) watch(ctx context.Context, mgr manager.Manager, o Options) error {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		DefaultNamespaces: map[string]cache.Config{o.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Field: fields.OneTermEqualSelector("metadata.name", o.SecretName),
		}},
	})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return err
	}
	log := logf.Log.WithName("certs")
	load := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != o.SecretName {
			return
		}
		if err := k.load(s); err != nil {
			log.Info("certificate Secret not usable yet", "secret", o.Namespace+"/"+o.SecretName, "reason", err.Error())
			return
		}
		log.Info("serving certificate loaded", "secret", o.Namespace+"/"+o.SecretName, "notAfter", k.Current().NotAfter)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, n any) { load(n) },
	}); err != nil {
		return err
	}
	// Every replica serves, so every replica reads the Secret: without this, the
	// manager would start the cache on the elected replica only.
	return mgr.Add(everyReplica{c})
}

// everyReplica runs a cache whether or not its replica is elected.
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }

func (k *Keeper) load(s *corev1.Secret) error {
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return errors.New("no tls.crt/tls.key")
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return err
	}
	if old := k.cert.Load(); old != nil && old.Leaf != nil && pair.Leaf != nil && old.Leaf.Equal(pair.Leaf) {
		return nil
	}
	if k.certDir != "" {
		for name, data := range map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key, "ca.crt": s.Data["ca.crt"]} {
			if err := writeAtomic(filepath.Join(k.certDir, name), data); err != nil {
				return err
			}
		}
	}
	k.cert.Store(&pair)
	return nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
