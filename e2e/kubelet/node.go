package kubelet

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/fabric"
)

// Config describes one real node.
type Config struct {
	// Name of the node (its Node object and hostname).
	Name string
	// Net is the node's network namespace with its uplinks.
	Net *fabric.Node
	// Root is the node's own state: it is what the node sees as /run, /var/lib,
	// /var/log, /opt and the additions to /etc.
	Root string
	// BinDir holds kubelet, kube-proxy, containerd, its shim, ctr and runc, and the
	// CNI plugins copied into the node's /opt/cni/bin.
	BinDir string
	// InitCommand runs the node's init (RunInit): the program and its leading
	// arguments, e.g. [".../nicpool-local", "node-init"].
	InitCommand []string
	// Address is the node's address on the cluster network, on a macvlan of eth0 so
	// that the node reaches its own pods (macvlan children do not talk to their parent).
	Address netip.Prefix
	// Gateway is the default route of the node, on the cluster network.
	Gateway netip.Addr
	// APIServer is the API server's host:port as this process reaches it; the node
	// reaches it through a relay on its own loopback.
	APIServer string
	// CA is the API server's certificate authority (PEM).
	CA []byte
	// ClientCert and ClientKey authenticate the kubelet and kube-proxy (PEM).
	ClientCert, ClientKey []byte
	// Hosts is the node's /etc/hosts.
	Hosts string
	// CgroupRoot is the cgroup (in every hierarchy) the node's pods go under.
	CgroupRoot string
	// CNIPlugins are the plugins of BinDir installed into the node's /opt/cni/bin.
	CNIPlugins []string
	// CNIConfig is the node's CNI configuration file (name → content) in
	// /etc/cni/net.d, and the files it refers to.
	CNIConfig map[string][]byte
	// Images are image archives imported into the node's containerd.
	Images []string
	// Registries are registries the node's containerd pulls from over plain HTTP,
	// host:port as the node reaches them: a hosts.toml each.
	Registries []string
	// Out receives progress lines.
	Out io.Writer
}

// Node is a running real node.
type Node struct {
	cfg       Config
	init      *exec.Cmd
	in        io.WriteCloser
	out       *bufio.Scanner
	initDone  chan struct{}
	initErr   error
	forwarder io.Closer
	apiLocal  string

	mu sync.Mutex
}

// Start brings a node up: its init, containerd (with the images imported), the
// kubelet and kube-proxy. It returns once the daemons run; the Node object turns
// Ready shortly after (WaitReady).
func Start(ctx context.Context, cfg Config) (n *Node, err error) {
	n = &Node{cfg: cfg, initDone: make(chan struct{})}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop())
		}
	}()
	if err := n.prepare(); err != nil {
		return n, err
	}
	if err := n.startInit(); err != nil {
		return n, err
	}
	if err := n.StartDaemon("containerd"); err != nil {
		return n, err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return n, err
	}
	for _, image := range cfg.Images {
		if err := Import(ctx, filepath.Join(cfg.BinDir, "ctr"), cfg.Root, image); err != nil {
			return n, err
		}
	}
	for _, d := range []string{"kubelet", "kube-proxy"} {
		if err := n.StartDaemon(d); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Root is the node's state directory on the host.
func (n *Node) Root() string { return n.cfg.Root }

// HostPath is the host path of a path inside the node (/run/nicpool/ipamd.sock).
func (n *Node) HostPath(path string) string {
	for _, d := range nodeDirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return filepath.Join(n.cfg.Root, path)
		}
	}
	// Elsewhere the node's mount namespace decides: go through its init's root.
	return filepath.Join(fmt.Sprintf("/proc/%d/root", n.initPid()), path)
}

func (n *Node) initPid() int {
	// The init is unshare's child: the only child of the process started.
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", n.init.Process.Pid, n.init.Process.Pid))
	var pid int
	_, _ = fmt.Sscan(string(children), &pid)
	return pid
}

// prepare writes the node's configuration into its root and gives the node its
// address.
func (n *Node) prepare() error {
	c := n.cfg
	for _, d := range []string{"etc/containerd", "etc/cni/net.d", "opt/cni/bin", "var/lib/kubelet", "var/lib/kube-proxy", "var/log", "run"} {
		if err := os.MkdirAll(filepath.Join(c.Root, d), 0o755); err != nil {
			return err
		}
	}
	addr, closer, err := c.Net.Forward(c.APIServer)
	if err != nil {
		return fmt.Errorf("relay the API server into node %s: %w", c.Name, err)
	}
	n.forwarder, n.apiLocal = closer, addr
	for _, p := range c.CNIPlugins {
		if err := copyFile(filepath.Join(c.BinDir, p), filepath.Join(c.Root, "opt/cni/bin", p), 0o755); err != nil {
			return err
		}
	}
	for name, data := range c.CNIConfig {
		path := filepath.Join(c.Root, "etc/cni/net.d", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	kubeconfig := Kubeconfig(n.apiLocal, c.CA, c.ClientCert, c.ClientKey)
	files := map[string][]byte{
		"etc/containerd/config.toml":        n.containerdConfig(),
		"var/lib/kubelet/config.yaml":       n.kubeletConfig(),
		"var/lib/kubelet/kubeconfig":        kubeconfig,
		"var/lib/kube-proxy/config.yaml":    KubeProxyConfig("/var/lib/kube-proxy/kubeconfig", c.Name, c.Address.Addr().String()),
		"var/lib/kube-proxy/kubeconfig":     kubeconfig,
		"etc/cni/net.d/multus.d/kubeconfig": kubeconfig,
	}
	for _, host := range c.Registries {
		files[filepath.Join(strings.TrimPrefix(registryHostsDir, "/"), host, "hosts.toml")] = registryHosts(host)
	}
	for name, data := range files {
		path := filepath.Join(c.Root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return n.address()
}

// address puts the node's address on a macvlan of eth0 and routes through the
// gateway.
func (n *Node) address() error {
	ns := n.cfg.Net.Namespace
	for _, args := range [][]string{
		{"-n", ns, "link", "add", "node0", "link", "eth0", "type", "macvlan", "mode", "bridge"},
		{"-n", ns, "addr", "add", n.cfg.Address.String(), "dev", "node0"},
		{"-n", ns, "link", "set", "node0", "up"},
		{"-n", ns, "route", "add", "default", "via", n.cfg.Gateway.String(), "dev", "node0"},
	} {
		if err := run("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// startInit starts the node's init in new mount and PID namespaces inside the
// node's network namespace.
func (n *Node) startInit() error {
	c := n.cfg
	hosts := filepath.Join(c.Root, ".hosts")
	if err := os.WriteFile(hosts, []byte(c.Hosts), 0o644); err != nil {
		return err
	}
	args := []string{"--net=" + c.Net.Path, "--", "unshare", "--mount", "--pid", "--fork", "--kill-child", "--"}
	args = append(args, c.InitCommand...)
	args = append(args, "--root", c.Root, "--hosts", hosts)
	cmd := exec.Command("nsenter", args...)
	log, err := os.OpenFile(filepath.Join(c.Root, "init.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stderr = log
	// The node dies with this process: end of its input stops it, and the kernel
	// kills it if this process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if n.in, err = cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %s: %w", c.Name, err)
	}
	n.init = cmd
	n.out = bufio.NewScanner(stdout)
	go func() {
		n.initErr = cmd.Wait()
		close(n.initDone)
	}()
	return nil
}

// request sends one request to the node's init and returns its answer.
func (n *Node) request(req initRequest) (initReply, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	data, err := json.Marshal(req)
	if err != nil {
		return initReply{}, err
	}
	if _, err := n.in.Write(append(data, '\n')); err != nil {
		return initReply{}, fmt.Errorf("node %s init: %w (log %s)", n.cfg.Name, err, filepath.Join(n.cfg.Root, "init.log"))
	}
	if !n.out.Scan() {
		return initReply{}, fmt.Errorf("node %s init ended (log %s)", n.cfg.Name, filepath.Join(n.cfg.Root, "init.log"))
	}
	var reply initReply
	if err := json.Unmarshal(n.out.Bytes(), &reply); err != nil {
		return reply, err
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("node %s: %s", n.cfg.Name, reply.Error)
	}
	return reply, nil
}

// Daemons are the node's daemons, in the order they start.
var Daemons = []string{"containerd", "kubelet", "kube-proxy"}

// StartDaemon starts one of the node's daemons (containerd, kubelet, kube-proxy).
func (n *Node) StartDaemon(name string) error {
	argv, err := n.argv(name)
	if err != nil {
		return err
	}
	_, err = n.request(initRequest{
		Op:   "start",
		Name: name,
		Argv: argv,
		Env:  []string{"PATH=" + n.cfg.BinDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"},
		Log:  "/var/log/" + name + ".log",
	})
	return err
}

// StopDaemon stops one of the node's daemons: SIGTERM, SIGKILL after grace (0:
// SIGKILL at once).
func (n *Node) StopDaemon(name string, grace time.Duration) error {
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	_, err := n.request(initRequest{Op: "stop", Name: name, Signal: int(sig), Grace: grace})
	return err
}

func (n *Node) argv(name string) ([]string, error) {
	bin := func(b string) string { return filepath.Join(n.cfg.BinDir, b) }
	switch name {
	case "containerd":
		return []string{bin("containerd"), "--config", "/etc/containerd/config.toml"}, nil
	case "kubelet":
		return []string{bin("kubelet"),
			"--config=/var/lib/kubelet/config.yaml",
			"--kubeconfig=/var/lib/kubelet/kubeconfig",
			"--hostname-override=" + n.cfg.Name,
			"--node-ip=" + n.cfg.Address.Addr().String(),
		}, nil
	case "kube-proxy":
		return []string{bin("kube-proxy"), "--config=/var/lib/kube-proxy/config.yaml"}, nil
	}
	return nil, fmt.Errorf("unknown daemon %q (known: %s)", name, strings.Join(Daemons, ", "))
}

// containerdSocket is containerd's socket as this process reaches it.
func (n *Node) containerdSocket() string {
	return filepath.Join(n.cfg.Root, "run/containerd/containerd.sock")
}

func (n *Node) waitContainerd(ctx context.Context) error {
	// Minutes, not seconds: a loaded two-core machine starts it slowly.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		if err := n.Ctr(ctx, "version"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd on %s not answering (log %s)", n.cfg.Name, filepath.Join(n.cfg.Root, "var/log/containerd.log"))
		case <-n.initDone:
			return fmt.Errorf("node %s init ended: %w (log %s)", n.cfg.Name, cmp.Or(n.initErr, errors.New("exit status 0")), filepath.Join(n.cfg.Root, "init.log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Import imports an image archive into the containerd of the node whose state
// directory is root, where the kubelet finds it without a pull.
func Import(ctx context.Context, ctr, root, archive string) error {
	cmd := exec.CommandContext(ctx, ctr, "--address", filepath.Join(root, "run/containerd/containerd.sock"), "--namespace", "k8s.io", "images", "import", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("import %s into the node of %s: %w: %s", archive, root, err, bytes.TrimSpace(out))
	}
	return nil
}

// Ctr runs ctr against the node's containerd in the Kubernetes namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) error {
	_, err := n.CtrOutput(ctx, args...)
	return err
}

// CtrOutput runs ctr against the node's containerd and returns its output.
func (n *Node) CtrOutput(ctx context.Context, args ...string) (string, error) {
	all := append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(n.cfg.BinDir, "ctr"), all...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Stop ends the node: its init stops the daemons, and the kernel kills what is left
// (containers) with it. The pods' cgroups are removed.
func (n *Node) Stop() error {
	var errs []error
	// Known before the node goes: its containers' cgroups, left by the kill.
	containers := n.ContainerCgroups()
	if n.init != nil {
		_ = n.in.Close()
		select {
		case <-n.initDone:
		case <-time.After(30 * time.Second):
			_ = n.init.Process.Kill()
			<-n.initDone
		}
		n.init = nil
	}
	if n.forwarder != nil {
		errs = append(errs, n.forwarder.Close())
		n.forwarder = nil
	}
	errs = append(errs, RemoveCgroups(n.cfg.CgroupRoot))
	for _, c := range containers {
		errs = append(errs, RemoveCgroups(c))
	}
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func copyFile(from, to string, mode os.FileMode) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, mode)
}

// Kill sends sig to every process of the node whose executable is named exe (the
// process of a container, e.g. nicpool-ipamd) and returns how many it signalled.
func (n *Node) Kill(exe string, sig syscall.Signal) (int, error) {
	pids, err := n.Pids(exe)
	if err != nil {
		return 0, err
	}
	var killed int
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err == nil {
			killed++
		}
	}
	return killed, nil
}

// Pids lists the processes of the node whose executable is named exe, as this host
// numbers them.
func (n *Node) Pids(exe string) ([]int, error) {
	init := n.initPid()
	if init == 0 {
		return nil, fmt.Errorf("node %s is not running", n.cfg.Name)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || filepath.Base(path) != exe || !descendantOf(pid, init) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

func descendantOf(pid, ancestor int) bool {
	for pid > 1 {
		if pid == ancestor {
			return true
		}
		pid = cluster.ParentOf(pid)
	}
	return false
}

// Namespaces identifies the node's own mount, PID and network namespaces (as
// /proc/PID/ns links read: "mnt:[4026532301]"): every process of the node is in one
// of them, or in a cgroup beneath CgroupRoot (containers).
func (n *Node) Namespaces() []string {
	pid := n.initPid()
	if pid == 0 {
		return nil
	}
	var out []string
	for _, kind := range []string{"mnt", "pid", "net"} {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind)); err == nil {
			out = append(out, link)
		}
	}
	return out
}

// CgroupRoot is the cgroup the node's pods go under, in every hierarchy.
func (n *Node) CgroupRoot() string { return n.cfg.CgroupRoot }

// Exec runs a command on the node as someone logged into it would: in the node's
// mount, network and PID namespaces (its /run/containerd, its /proc). It returns the
// command's output.
func (n *Node) Exec(ctx context.Context, argv ...string) (string, error) {
	pid := n.initPid()
	if pid == 0 {
		return "", fmt.Errorf("node %s is not running", n.cfg.Name)
	}
	args := append([]string{"--target", strconv.Itoa(pid), "--mount", "--net", "--pid", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("on node %s: %s: %w: %s", n.cfg.Name, strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Tool is the path of one of BinDir's tools (ctr, crictl), valid on the node too.
func (n *Node) Tool(name string) string { return filepath.Join(n.cfg.BinDir, name) }

// SetLinks sets the node's network links (its uplinks: eth0, eth1) up or down. Down,
// the node and its pods are off the fabric, as a node that lost its network; its
// daemons still reach the API server through their relay unless stopped.
func (n *Node) SetLinks(up bool, links ...string) error {
	state := "down"
	if up {
		state = "up"
	}
	for _, l := range links {
		if err := run("ip", "-n", n.cfg.Net.Namespace, "link", "set", l, state); err != nil {
			return err
		}
	}
	return nil
}
