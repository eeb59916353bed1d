// Command nicpool-webhook serves nicpool's admission webhooks and runs the
// leader-elected cluster controllers (pool totalIPCount, garbage collector).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/nicpool/nicpool/certs"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/version"
	buildinfo "github.com/nicpool/nicpool/version/metric"
	nicwebhook "github.com/nicpool/nicpool/webhook"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/views"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// options are the command line.
type options struct {
	namespace, serviceName string
	host                   string
	port                   int
	certDir                string
	selfManaged            bool
	secretName             string
	extraDNSNames          string
	caValidity             time.Duration
	certValidity           time.Duration
	certLookahead          time.Duration
	certCheckInterval      time.Duration
	metricsAddr, probeAddr string
	pprofAddr              string
	leaderElect            bool
	leaderElectionID       string
	admission              nicwebhook.Options
	gc                     gc.Options
}

func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return configs.DefaultNamespace
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.namespace, "namespace", defaultNamespace(), "nicpool's namespace: the webhook Service and certificate Secret live there, and no webhook applies to it; $POD_NAMESPACE when set")
	fs.StringVar(&o.serviceName, "service-name", configs.DefaultServiceName, "the webhook Service the API server calls")
	fs.StringVar(&o.host, "webhook-host", "", "address the webhook server listens on (empty: all)")
	fs.IntVar(&o.port, "webhook-port", 9443, "port the webhook server listens on")
	fs.StringVar(&o.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key (mounted from cert-manager's Secret); in self-managed mode the certificate is also written there")
	fs.BoolVar(&o.selfManaged, "self-managed-certs", false, "generate the CA and serving certificate, keep them in --cert-secret, inject the CA into nicpool's webhook configurations and rotate before expiry")
	fs.StringVar(&o.secretName, "cert-secret", "nicpool-webhook-cert", "self-managed mode: the Secret in --namespace that holds the certificates")
	fs.StringVar(&o.extraDNSNames, "cert-extra-dns-names", "", "self-managed mode: comma-separated names added to the serving certificate besides <service>.<namespace>.svc[.cluster.local]")
	fs.DurationVar(&o.caValidity, "ca-validity", 10*365*24*time.Hour, "self-managed mode: validity of a new CA")
	fs.DurationVar(&o.certValidity, "cert-validity", 365*24*time.Hour, "self-managed mode: validity of a new serving certificate")
	fs.DurationVar(&o.certLookahead, "cert-lookahead", 90*24*time.Hour, "self-managed mode: replace a certificate this long before it expires")
	fs.DurationVar(&o.certCheckInterval, "cert-check-interval", 12*time.Hour, "self-managed mode: how often expiry is checked")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address serving Go's runtime profiles (CPU, heap, goroutines) on /debug/pprof/; 0 disables, the default. They show the webhook's internals: bind it to localhost")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect one replica to run the cluster controllers and certificate rotation (set with more than one replica)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "nicpool-webhook", "name of the leader election Lease in --namespace")
	fs.BoolVar(&o.admission.ClusterNetworkNicpool, "cluster-network-nicpool", false, "nicpool is the IPAM of the cluster network (eth0): warn at admission of a pod whose ipam.spidernet.io/ippools leaves eth0 out (its ADD fails)")
	fs.BoolVar(&o.admission.RefusePoolDeleteWhileAllocated, "refuse-pool-delete-while-allocated", false, "refuse the DELETE of a SpiderIPPool that still holds addresses; off (spiderpool's default), a DELETE is accepted and the pool's finalizer keeps it, serving nothing new, until its last address is released")
	o.admission.Switches.BindFlags(fs)
	o.gc.BindFlags(fs)
}

func main() {
	var o options
	o.bind(flag.CommandLine)
	// RFC 3339 with nanoseconds, the time format of every nicpool log line (the CNI
	// plugin's too); --zap-time-encoding changes it.
	zo := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	zo.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the version, git revision and Go version, and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Line("nicpool-webhook"))
		return
	}
	// nicpool_build_info on the manager's /metrics.
	crmetrics.Registry.MustRegister(buildinfo.BuildInfo())
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zo)))
	ctx := ctrl.SetupSignalHandler()
	if err := run(ctx, ctrl.GetConfigOrDie(), o, nil); err != nil {
		fmt.Fprintln(os.Stderr, "nicpool-webhook:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends. started, when not nil, receives the manager once it is
// set up (for tests).
func run(ctx context.Context, cfg *rest.Config, o options, started func(manager.Manager, *certs.Keeper)) error {
	if err := o.admission.Switches.Validate(); err != nil {
		return err
	}
	// The garbage collector keeps StatefulSet addresses exactly when admission stamps
	// StatefulSet pods to take them over: one switch for both.
	o.gc.Switches = o.admission.Switches
	var keeper *certs.Keeper
	var tlsOpts []func(*tls.Config)
	if o.selfManaged {
		keeper = certs.NewKeeper()
		tlsOpts = append(tlsOpts, keeper.TLSOption)
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                  nicwebhook.NewScheme(),
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectionID,
		LeaderElectionNamespace: o.namespace,
		Cache:                   cacheOptions(),
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: o.host, Port: o.port, CertDir: o.certDir, TLSOpts: tlsOpts,
		}),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if o.selfManaged {
		if err := certs.Setup(ctx, mgr, keeper, certs.Options{
			Namespace:          o.namespace,
			SecretName:         o.secretName,
			DNSName:            fmt.Sprintf("%s.%s.svc", o.serviceName, o.namespace),
			ExtraDNSNames:      extraNames(o),
			MutatingWebhooks:   []string{configs.MutatingName},
			ValidatingWebhooks: []string{configs.ValidatingName},
			CertDir:            o.certDir,
			CAValidity:         o.caValidity,
			CertValidity:       o.certValidity,
			Lookahead:          o.certLookahead,
			CheckInterval:      o.certCheckInterval,
			LeaderElection:     o.leaderElect,
		}); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("serving-certificate", keeper.Checker); err != nil {
			return err
		}
	}
	// nicpool_webhook_certificate_expiry_timestamp_seconds: the self-managed
	// certificate in memory, or the mounted one read at scrape time. A test running
	// run again in one process replaces the collector of the previous run.
	current := certs.FileCertificate(filepath.Join(o.certDir, "tls.crt"))
	if keeper != nil {
		current = keeper.Current
	}
	expiry := certs.ExpiryCollector{Current: current}
	crmetrics.Registry.Unregister(expiry)
	if err := crmetrics.Registry.Register(expiry); err != nil {
		return fmt.Errorf("certificate expiry metric: %w", err)
	}
	if _, err := nicwebhook.Setup(ctx, mgr, o.admission); err != nil {
		return err
	}
	if err := registerGarbageCollector(mgr, o.gc); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if started != nil {
		started(mgr, keeper)
	}
	return mgr.Start(ctx)
}

func extraNames(o options) []string {
	names := []string{fmt.Sprintf("%s.%s.svc.cluster.local", o.serviceName, o.namespace)}
	for _, n := range strings.Split(o.extraDNSNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// registerGarbageCollector is where the leader-elected garbage collector and pool
// finalizer of webhook/controller/gc join the manager.
func registerGarbageCollector(mgr manager.Manager, o gc.Options) error {
	return gc.SetupWithManager(mgr, o)
}

// cacheOptions keep the manager's cache small: the webhook caches every pod, pool and
// SpiderEndpoint of the cluster. No code of the webhook reads managedFields, and an
// update that omits them keeps them on the server. Pods and endpoints, the bulk of it,
// keep only what their readers here read: pods as metadata alone (gc.PodMetadata,
// gc.TransformPodMetadata; the garbage collector watches finished pods in full in a
// cache of its own), nodes and endpoints reduced (gc.TransformNode,
// views.TransformEndpoint).
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			gc.PodMetadata():          {Transform: gc.TransformPodMetadata},
			&corev1.Node{}:            {Transform: gc.TransformNode},
			&v2beta1.SpiderEndpoint{}: {Transform: views.TransformEndpoint},
		},
	}
}
