// Command nicpool-ipamd is the node IPAM daemon: it serves the CNI plugin on a unix
// socket and allocates addresses for the pods of its node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/scheme"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/version"
	buildinfo "github.com/nicpool/nicpool/version/metric"
)

func main() {
	var (
		nodeName   = flag.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME, from the downward API's spec.nodeName)")
		socket     = flag.String("socket", api.DefaultSocketPath, "unix socket the CNI plugin calls")
		spiderpool = flag.String("spiderpool-socket", "",
			"unix socket where ipamd answers spiderpool's coordinator CNI plugin in the place of spiderpool's agent (GET "+coordinator.Path+"); coordinator dials "+coordinator.DefaultSocketPath+", as the manifests set it; empty serves nothing there and reads no SpiderCoordinator")
		namespace   = flag.String("namespace", envOr("POD_NAMESPACE", daemon.DefaultMultusNamespace), "nicpool's namespace, where ipamd keeps its node's heartbeat Lease (nicpool-ipamd-NODE) that kubectl nicpool status reads; $POD_NAMESPACE when set; empty keeps none")
		metricsAddr = flag.String("metrics-bind-address", ":9271", "address serving Prometheus metrics on /metrics; 0 disables")
		healthAddr  = flag.String("health-probe-bind-address", ":9272", "address serving /healthz and /readyz; 0 disables")
		pprofAddr   = flag.String("pprof-bind-address", "0", "address serving Go's runtime profiles (CPU, heap, goroutines) on /debug/pprof/; 0 disables, the default. They show the daemon's internals: bind it to localhost")
		qps         = flag.Float64("kube-api-qps", 100, "API requests per second this daemon may send")
		burst       = flag.Int("kube-api-burst", 200, "API request burst")
		order       = flag.String("allocation-order", allocator.NextAfterLast.String(),
			"which free address of a pool an allocation takes: next-after-last (the one after the address handed out last, so released addresses are reused last) or lowest")
		multusNamespace = flag.String("multus-namespace", envOr("POD_NAMESPACE", daemon.DefaultMultusNamespace),
			"namespace of the NetworkAttachmentDefinition a bare spec.multusName entry names, as spiderpool reads a bare entry in its own namespace; also of a bare v1.multus-cni.io/default-network and --multus-cluster-network. $POD_NAMESPACE, nicpool's own namespace, when set")
		clusterNetwork = flag.String("multus-cluster-network", "",
			"the NetworkAttachmentDefinition ([namespace/]name) Multus attaches a pod's eth0 through when the pod has no v1.multus-cni.io/default-network (Multus's clusterNetwork, spiderpool's MULTUS_CLUSTER_NETWORK); empty: eth0 matches no pool that sets spec.multusName unless the pod names its default network")
	)
	// RFC 3339 with nanoseconds, the time format of every nicpool log line (the CNI
	// plugin's too); --zap-time-encoding changes it.
	var switches ipamconf.Switches
	switches.BindFlags(flag.CommandLine)
	opts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	opts.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the version, git revision and Go version, and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Line("nicpool-ipamd"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("ipamd")
	// --kubeconfig is controller-runtime's flag (with $KUBECONFIG and the in-cluster
	// service account as fallbacks).
	allocationOrder, err := allocator.ParseOrder(*order)
	if err != nil {
		log.Error(err, "--allocation-order")
		os.Exit(2)
	}
	if err := switches.Validate(); err != nil {
		log.Error(err, "IP families")
		os.Exit(2)
	}
	multus := annotations.Multus{Namespace: *multusNamespace, ClusterNetwork: *clusterNetwork}
	if err := run(*nodeName, *socket, *spiderpool, *namespace, *metricsAddr, *healthAddr, *pprofAddr, float32(*qps), *burst, allocationOrder, multus, switches); err != nil {
		log.Error(err, "ipamd stopped")
		os.Exit(1)
	}
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

func run(nodeName, socket, spiderpoolSocket, namespace, metricsAddr, healthAddr, pprofAddr string, qps float32, burst int, order allocator.Order, multus annotations.Multus, switches ipamconf.Switches) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "nicpool-ipamd/" + nodeName
	d, err := daemon.New(cfg, daemon.Options{NodeName: nodeName, SocketPath: socket, SpiderpoolSocketPath: spiderpoolSocket, Scheme: scheme.New(), Log: ctrl.Log.WithName("ipamd"), AllocationOrder: order, Multus: multus, LeaseNamespace: namespace, Switches: switches})
	if err != nil {
		return err
	}
	if metricsAddr != "0" && metricsAddr != "" {
		crmetrics.Registry.MustRegister(buildinfo.BuildInfo())
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
		go serveHTTP(ctx, metricsAddr, mux)
	}
	if pprofAddr != "0" && pprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		go serveHTTP(ctx, pprofAddr, mux)
	}
	if healthAddr != "0" && healthAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !d.Ready() {
				http.Error(w, "caches not synced", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		go serveHTTP(ctx, healthAddr, mux)
	}
	done, err := d.Start(ctx)
	if err != nil {
		return err
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
		<-d.Released()
	}
	return nil
}

func serveHTTP(ctx context.Context, addr string, h http.Handler) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		ctrl.Log.WithName("ipamd").Error(err, "HTTP server stopped", "address", addr)
	}
}
