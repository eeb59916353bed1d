package fabric

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// NamespacePrefix starts the name of every network namespace this package creates.
const NamespacePrefix = "nicpool-e2e-"

// namespaceDir is where iproute2 keeps named network namespaces.
const namespaceDir = "/var/run/netns"

var ownerPattern = regexp.MustCompile(`^` + NamespacePrefix + `(\d+)-`)

// Fabric is the set of L2 networks the nodes' uplinks join.
type Fabric struct {
	// Networks are the uplink names every node gets, one bridge each ("eth0", "eth1").
	Networks []string

	name  string
	mu    sync.Mutex
	nodes []*Node
}

// Node is a node's network namespace with one uplink per fabric network, named as
// the network (so a NetworkAttachmentDefinition says `master: eth1` on every node).
type Node struct {
	Name      string
	Namespace string
	// Path is the namespace's bind mount, for ns.GetNS and `ip netns exec`.
	Path string
}

// New creates the fabric namespace with one bridge per network. It first sweeps
// namespaces left by runs whose process is gone.
func New(networks ...string) (*Fabric, error) {
	if err := Sweep(); err != nil {
		return nil, err
	}
	f := &Fabric{Networks: networks, name: namespaceName("fabric")}
	if err := ip("netns", "add", f.name); err != nil {
		return nil, err
	}
	for i := range networks {
		br := fmt.Sprintf("br%d", i)
		if err := ip("-n", f.name, "link", "add", br, "type", "bridge"); err != nil {
			return f, errors.Join(err, f.Close())
		}
		if err := ip("-n", f.name, "link", "set", br, "up"); err != nil {
			return f, errors.Join(err, f.Close())
		}
	}
	return f, nil
}

// AddNode creates a node namespace whose uplinks are veth peers plugged into the
// fabric's bridges.
func (f *Fabric) AddNode(name string) (*Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := &Node{Name: name, Namespace: namespaceName("node-" + name)}
	n.Path = filepath.Join(namespaceDir, n.Namespace)
	if err := ip("netns", "add", n.Namespace); err != nil {
		return nil, err
	}
	f.nodes = append(f.nodes, n)
	if err := ip("-n", n.Namespace, "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	for i, uplink := range f.Networks {
		// The fabric side is named after the node index and network, short enough
		// for the 15-character interface name limit.
		port := fmt.Sprintf("n%d-%d", len(f.nodes)-1, i)
		if err := ip("-n", f.name, "link", "add", port, "type", "veth", "peer", "name", uplink, "netns", n.Namespace); err != nil {
			return nil, err
		}
		if err := ip("-n", f.name, "link", "set", port, "master", fmt.Sprintf("br%d", i), "up"); err != nil {
			return nil, err
		}
		if err := ip("-n", n.Namespace, "link", "set", uplink, "up"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Path is the fabric namespace's bind mount.
func (f *Fabric) Path() string { return filepath.Join(namespaceDir, f.name) }

// Route makes the fabric the router of a network: its bridge gets the gateway
// addresses, and the fabric's namespace forwards between its bridges.
func (f *Fabric) Route(network string, gateways ...netip.Prefix) error {
	i := slices.Index(f.Networks, network)
	if i < 0 {
		return fmt.Errorf("no network %s in the fabric (%v)", network, f.Networks)
	}
	for _, g := range gateways {
		if err := ip("-n", f.name, "addr", "add", g.String(), "dev", fmt.Sprintf("br%d", i)); err != nil {
			return err
		}
	}
	if err := ip("-n", f.name, "link", "set", "lo", "up"); err != nil {
		return err
	}
	for _, key := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"} {
		if err := ip("netns", "exec", f.name, "sysctl", "-q", "-w", key); err != nil {
			return err
		}
	}
	return nil
}

// RouteOnLink routes dest out of network's bridge from the fabric itself, so that
// connections the fabric opens to it (Service addresses, which its kube-proxy
// rewrites) get past the routing decision.
func (f *Fabric) RouteOnLink(network string, dest netip.Prefix) error {
	i := slices.Index(f.Networks, network)
	if i < 0 {
		return fmt.Errorf("no network %s in the fabric (%v)", network, f.Networks)
	}
	return ip("-n", f.name, "route", "add", dest.String(), "dev", fmt.Sprintf("br%d", i))
}

// Close removes the node namespaces and the fabric; their links go with them.
func (f *Fabric) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, n := range f.nodes {
		errs = append(errs, DeleteNamespace(n.Namespace))
	}
	f.nodes = nil
	errs = append(errs, DeleteNamespace(f.name))
	return errors.Join(errs...)
}

// NewPodNamespace creates an empty network namespace for a pod sandbox, loopback up.
func NewPodNamespace(id string) (name, path string, err error) {
	name = namespaceName("pod-" + id)
	if err := ip("netns", "add", name); err != nil {
		return "", "", err
	}
	if err := ip("-n", name, "link", "set", "lo", "up"); err != nil {
		return "", "", errors.Join(err, DeleteNamespace(name))
	}
	return name, filepath.Join(namespaceDir, name), nil
}

// DeleteNamespace removes a named network namespace; a missing one is not an error.
func DeleteNamespace(name string) error {
	if _, err := os.Stat(filepath.Join(namespaceDir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return ip("netns", "delete", name)
}

// Sweep removes the namespaces of earlier runs whose process no longer exists.
func Sweep() error {
	entries, err := os.ReadDir(namespaceDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		m := ownerPattern.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if alive(pid) {
			continue
		}
		errs = append(errs, DeleteNamespace(e.Name()))
	}
	return errors.Join(errs...)
}

// Leftovers lists the namespaces this process created and has not removed.
func Leftovers() []string {
	entries, _ := os.ReadDir(namespaceDir)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), namespaceName("")) {
			out = append(out, e.Name())
		}
	}
	return out
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func namespaceName(suffix string) string {
	return fmt.Sprintf("%s%d-%s", NamespacePrefix, os.Getpid(), suffix)
}

func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
