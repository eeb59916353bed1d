package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/kubelet"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/hack/images"
)

// NodeKind says what plays the cluster's nodes.
type NodeKind string

const (
	// NodeStandIn nodes play only the kubelet's network role, in this process: fast,
	// and nicpool's components run as local processes.
	NodeStandIn NodeKind = "standin"
	// NodeKubelet nodes are real: kubelet, containerd and runc built from source
	// (make tools-node), each node in its own network, mount and PID namespaces, and
	// nicpool installed from its images and manifests as a user installs it.
	NodeKubelet NodeKind = "kubelet"
)

// The cluster network of real nodes. The fabric routes it: its bridge holds the pods'
// gateway, the API server is published there for pods, and a kube-proxy in the
// fabric maps Service addresses for pods (their macvlan interfaces bypass the node's
// own network stack).
var (
	clusterGateway   = netip.MustParsePrefix("10.10.0.1/24")
	clusterGateway6  = netip.MustParsePrefix("fd00:10::1/64")
	secondaryGateway = []netip.Prefix{netip.MustParsePrefix("10.20.0.1/24"), netip.MustParsePrefix("fd00:20::1/64")}
	// kubernetesServiceIP is the `kubernetes` Service's address in envtest's Service
	// range 10.0.0.0/24: what pods dial to reach the API server.
	kubernetesServiceIP = "10.0.0.1"
	// serviceRange is envtest's Service range, which the fabric routes to its
	// kube-proxy: the API server's egress dials webhooks' Services from there.
	serviceRange = netip.MustParsePrefix("10.0.0.0/24")
)

// registryPort is where the fabric serves Options.Registry, on the cluster network's
// gateway: the fabric's namespace is this run's alone, so the port is free.
const registryPort = 5000

// nodeAddress is the i-th real node's address on the cluster network, above the
// sample pools' ranges.
func nodeAddress(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 10, 0, byte(241 + i)}), 24)
}

// NodeTools are the tools of bin/ real nodes run.
var NodeTools = []string{"kubelet", "kube-proxy", "kubectl", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "loopback"}

// kubeletControllers are the controllers real nodes need besides cluster.Controllers:
// DaemonSets, Services' endpoints, node health, the CA every pod trusts.
var kubeletControllers = []string{
	"daemonset-controller",
	"endpointslice-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
	"pod-garbage-collector-controller",
	"root-ca-certificate-publisher-controller",
	"disruption-controller",
}

// ImagesDir holds the image archives `make images` writes; real nodes import them.
func ImagesDir() string { return filepath.Join(testenv.RepoRoot(), "dist", "images") }

// nodePrerequisites says what real nodes need and the host lacks: the tools of
// bin/, and nft, which kube-proxy runs in nftables mode (kubelet.KubeProxyConfig)
// finds in the host's PATH. Without nft kube-proxy exits, no ClusterIP answers,
// and nicpool's pods never become ready, which says nothing of the cause.
func nodePrerequisites(binDir string) error {
	for _, t := range NodeTools {
		if _, err := os.Stat(filepath.Join(binDir, t)); err != nil {
			return fmt.Errorf("%s missing in %s: run `make tools-node` first: %w", t, binDir, err)
		}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("real nodes need nft for kube-proxy's nftables mode, and it is not in PATH: install nftables (Debian and Ubuntu: apt-get install nftables): %w", err)
	}
	return nil
}

// startKubeletCluster starts the control plane for real nodes: the API server
// publishes itself on the fabric and reaches the cluster through the egress proxy.
func (s *Stack) startKubeletCluster(ctx context.Context, kubeconfig string) error {
	if err := nodePrerequisites(s.binDir); err != nil {
		return err
	}
	if err := s.Fabric.Route(Uplinks[0], clusterGateway, clusterGateway6); err != nil {
		return err
	}
	if err := s.Fabric.Route(Uplinks[1], secondaryGateway...); err != nil {
		return err
	}
	if err := s.Fabric.RouteOnLink(Uplinks[0], serviceRange); err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var err error
	if s.egress, err = kubelet.StartEgressProxy(filepath.Join(dir, "egress.sock"), s.Fabric.DialContext); err != nil {
		return err
	}
	egressConfig := filepath.Join(dir, "egress-selector.yaml")
	if err := s.egress.WriteConfig(egressConfig); err != nil {
		return err
	}
	s.Cluster, err = cluster.Start(ctx, cluster.Options{
		Dir:        dir,
		Kubeconfig: kubeconfig,
		APIServerArgs: map[string][]string{
			"egress-selector-config-file": {egressConfig},
			// The `kubernetes` Service's endpoint: the relay on the fabric below.
			"advertise-address": {clusterGateway.Addr().String()},
			// envtest turns the ServiceAccount admission plugin off; real pods need
			// their token volume (one plugin must be named: this one is irrelevant).
			"disable-admission-plugins": {"DefaultStorageClass"},
			// Node names resolve on the nodes only; the API server dials addresses.
			"kubelet-preferred-address-types": {"InternalIP", "Hostname"},
		},
		ServingAddresses: []string{kubernetesServiceIP, clusterGateway.Addr().String()},
		ExtraControllers: kubeletControllers,
		ControllerManagerArgs: []string{
			// Notice a stopped kubelet within seconds, not the default 40.
			"--node-monitor-grace-period=16s",
			"--node-monitor-period=2s",
		},
	})
	if err != nil {
		return err
	}
	u, err := url.Parse(s.Config.Host)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(u.Host)
	if _, s.apiRelay, err = s.Fabric.Forward(net.JoinHostPort(clusterGateway.Addr().String(), port), u.Host); err != nil {
		return fmt.Errorf("publish the API server on the fabric: %w", err)
	}
	return s.startFabricProxy(u.Host)
}

// startFabricProxy runs kube-proxy in the fabric's namespace, the router of the pods'
// traffic to Services.
func (s *Stack) startFabricProxy(apiServer string) error {
	dir := filepath.Join(s.Dir, "fabric")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	local, relay, err := s.Fabric.Forward("127.0.0.1:0", apiServer)
	if err != nil {
		return err
	}
	s.fabricRelay = relay
	cert, key, err := s.Credentials("system:kube-proxy", "system:node-proxier")
	if err != nil {
		return err
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubelet.Kubeconfig(local, s.CA(), cert, key), 0o600); err != nil {
		return err
	}
	config := filepath.Join(dir, "kube-proxy.yaml")
	if err := os.WriteFile(config, kubelet.KubeProxyConfig(kc, "fabric", "127.0.0.1"), 0o644); err != nil {
		return err
	}
	s.fabricProxy, err = cluster.StartProcess("kube-proxy fabric", "nsenter",
		[]string{"--net=" + s.Fabric.Path(), "--", filepath.Join(s.binDir, "kube-proxy"), "--config=" + config},
		filepath.Join(dir, "kube-proxy.log"))
	return err
}

// addRealNode starts the i-th real node.
func (s *Stack) addRealNode(ctx context.Context, i int, archives []string) error {
	name := fmt.Sprintf("node-%d", i+1)
	net, err := s.Fabric.AddNode(name)
	if err != nil {
		return err
	}
	cert, key, err := s.Credentials("system:node:"+name, "system:nodes", "system:masters")
	if err != nil {
		return err
	}
	cniConfig, err := multusConfig(s.clusterNetwork())
	if err != nil {
		return err
	}
	self, err := s.nodeInitCommand()
	if err != nil {
		return err
	}
	u, err := url.Parse(s.Config.Host)
	if err != nil {
		return err
	}
	n, err := kubelet.Start(ctx, kubelet.Config{
		Name:        name,
		Net:         net,
		Root:        filepath.Join(s.Dir, "nodes", name),
		BinDir:      s.binDir,
		InitCommand: self,
		Address:     nodeAddress(i),
		Gateway:     clusterGateway.Addr(),
		APIServer:   u.Host,
		CA:          s.CA(),
		ClientCert:  cert,
		ClientKey:   key,
		Hosts:       s.hosts(),
		CgroupRoot:  "/" + net.Namespace,
		CNIPlugins:  []string{"multus", "macvlan", "loopback"},
		CNIConfig:   cniConfig,
		Images:      archives,
		Registries:  s.registries(),
	})
	if err != nil {
		return err
	}
	s.Kubelets = append(s.Kubelets, n)
	return nil
}

// serveRegistry serves a registry to the real nodes on the cluster network's gateway.
func (s *Stack) serveRegistry(h http.Handler) error {
	addr := net.JoinHostPort(clusterGateway.Addr().String(), strconv.Itoa(registryPort))
	l, err := s.Fabric.Listen(addr)
	if err != nil {
		return fmt.Errorf("serve the registry on the fabric: %w", err)
	}
	s.registry, s.registryHost = &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}, addr
	go func() { _ = s.registry.Serve(l) }()
	return nil
}

// Registry is where real nodes reach Options.Registry (host:port, plain HTTP):
// the registry part of the references they pull. Empty without one.
func (s *Stack) Registry() string { return s.registryHost }

// registries are the registries real nodes pull from.
func (s *Stack) registries() []string {
	if s.registryHost == "" {
		return nil
	}
	return []string{s.registryHost}
}

// hosts is every real node's /etc/hosts: the nodes by name.
func (s *Stack) hosts() string {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	for i := range s.nodeCount {
		fmt.Fprintf(&b, "%s node-%d\n", nodeAddress(i).Addr(), i+1)
	}
	return b.String()
}

// nodeInitCommand builds nicpool-local from this checkout, whose node-init verb is
// every node's init.
func (s *Stack) nodeInitCommand() ([]string, error) {
	bin := filepath.Join(s.Dir, "bin", "nicpool-local")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/nicpool-local")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build nicpool-local: %w\n%s", err, out)
	}
	return []string{bin, "node-init"}, nil
}

// multusConfig is a node's CNI configuration: the Multus thin plugin delegating the
// pods' eth0 to the cluster network and reading secondary networks from
// NetworkAttachmentDefinitions.
func multusConfig(clusterNetwork map[string]any) (map[string][]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "multus-cni-network",
		"type":       "multus",
		"kubeconfig": "/etc/cni/net.d/multus.d/kubeconfig",
		"confDir":    "/etc/cni/net.d/multus.d",
		"cniDir":     "/var/lib/cni/multus",
		"binDir":     "/opt/cni/bin",
		"logFile":    "/var/log/multus.log",
		"logLevel":   "verbose",
		"delegates":  []any{clusterNetwork},
	}
	data, err := json.MarshalIndent(map[string]any{"cniVersion": "1.0.0", "name": "multus-cni-network", "plugins": []any{conf}}, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"00-multus.conflist": data}, nil
}

// imageArchives are the archives `make images` wrote.
func imageArchives() ([]string, error) {
	archives, err := filepath.Glob(filepath.Join(ImagesDir(), "*.tar"))
	if err != nil {
		return nil, err
	}
	if len(archives) == 0 {
		return nil, fmt.Errorf("no image archives in %s: run `make images`", ImagesDir())
	}
	return archives, nil
}

// installNicpool installs nicpool as a user does: kubectl apply -k of the
// self-managed overlay (through an overlay of its own that names nicpool's images as
// the nodes imported them from archives), or Options.Install; waits until ipamd runs
// on every node and the webhook answers (on the host network: its pods need no
// address from the pools it guards), then creates the sample pools through it.
func (s *Stack) installNicpool(ctx context.Context, archives []string) error {
	if s.install != nil {
		s.progress("nicpool: installing in namespace %s (Options.Install)", s.namespace)
		if err := s.install(ctx, s); err != nil {
			return fmt.Errorf("install nicpool: %w", err)
		}
	} else {
		s.progress("nicpool: kubectl apply -k manifests/overlays/self-managed, with the images' tags")
		dir, err := s.writeInstallOverlay(archives)
		if err != nil {
			return err
		}
		if err := s.Kubectl(ctx, io.Discard, "apply", "-k", dir); err != nil {
			return err
		}
	}
	if err := s.waitNicpool(ctx); err != nil {
		return err
	}
	// The first pool is also the proof that the API server reaches the webhook
	// through its Service: retried until the Service's endpoints are programmed.
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = s.Apply(ctx, filepath.Join(testenv.RepoRoot(), "examples", ExamplePools))
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("sample pools through the webhook's Service: %w (%w)", last, err)
	}
	return nil
}

// writeInstallOverlay writes, under the stack's directory, a kustomization of the
// self-managed overlay whose images are the archives' as they name themselves. The
// manifests name the release they belong to (v0.1.0), while `make up` and `make e2e`
// tag the images they build with the version their binaries carry (git describe's,
// v0.1.0-3-gabcdef0 between releases), so that `kubectl nicpool version` finds one
// version in the cluster, not a skew between the binaries and their images' tags.
func (s *Stack) writeInstallOverlay(archives []string) (string, error) {
	dir := filepath.Join(s.Dir, "install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base, err := filepath.Rel(dir, filepath.Join(testenv.RepoRoot(), "manifests", "overlays", "self-managed"))
	if err != nil {
		return "", err
	}
	type image struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	}
	var imgs []image
	for _, a := range archives {
		ref, err := images.Name(a)
		if err != nil {
			return "", err
		}
		// registry/repository:tag: the tag follows the last colon after the last slash.
		slash := strings.LastIndex(ref, "/")
		colon := strings.LastIndex(ref, ":")
		if colon <= slash {
			return "", fmt.Errorf("%s names the image %s, without a tag", a, ref)
		}
		imgs = append(imgs, image{Name: ref[:colon], NewTag: ref[colon+1:]})
	}
	data, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{filepath.ToSlash(base)},
		"images":     imgs,
	})
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), data, 0o644)
}

// Kubectl runs bin/kubectl as the admin, its output to out.
func (s *Stack) Kubectl(ctx context.Context, out io.Writer, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, "kubectl"), append([]string{"--kubeconfig", s.AdminKubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// waitNicpool waits until ipamd is ready on every node and both webhook replicas
// are available with their CA injected.
func (s *Stack) waitNicpool(ctx context.Context) error {
	ns := s.namespace
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		ds := &appsv1.DaemonSet{}
		deploy := &appsv1.Deployment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nicpool-ipamd"}, ds); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // polled again; the timeout reports it
		}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nicpool-webhook"}, deploy); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // polled again; the timeout reports it
		}
		last = fmt.Sprintf("ipamd %d/%d ready, webhook %d/%d available", ds.Status.NumberReady, len(s.Kubelets), deploy.Status.AvailableReplicas, *deploy.Spec.Replicas)
		if int(ds.Status.NumberReady) != len(s.Kubelets) || deploy.Status.AvailableReplicas != *deploy.Spec.Replicas {
			return false, nil
		}
		return s.webhookCAInjected(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("wait for nicpool (%s): %w; logs under %s", last, err, filepath.Join(s.Dir, "nodes"))
	}
	return nil
}

// Sandbox finds the network namespace of a pod on a real node, from the CNI result
// cache the runtime keeps: a path through the node's init, in whose mount namespace
// the runtime pinned it.
func (s *Stack) realSandbox(namespace, name string) (string, bool) {
	for _, n := range s.Kubelets {
		if path, ok := n.Sandbox(namespace, name); ok {
			return path, true
		}
	}
	return "", false
}

func (s *Stack) stopKubeletMode() error {
	var errs []error
	for i := len(s.Kubelets) - 1; i >= 0; i-- {
		errs = append(errs, s.Kubelets[i].Stop())
	}
	s.Kubelets = nil
	if s.fabricProxy != nil {
		errs = append(errs, s.fabricProxy.Stop(10*time.Second))
		s.fabricProxy = nil
	}
	for _, c := range []io.Closer{s.fabricRelay, s.apiRelay} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	s.fabricRelay, s.apiRelay = nil, nil
	if s.registry != nil {
		errs = append(errs, s.registry.Close())
		s.registry, s.registryHost = nil, ""
	}
	if s.egress != nil {
		errs = append(errs, s.egress.Close())
		s.egress = nil
	}
	return errors.Join(errs...)
}
