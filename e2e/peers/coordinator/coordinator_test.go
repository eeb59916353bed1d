// Package coordinator runs spiderpool's own coordinator CNI plugin, built from
// spiderpool's module (github.com/spidernet-io/spiderpool v1.2.2, cmd/coordinator, a
// tool of this module), after nicpool's IPAM on the local stack's nodes, where ipamd
// answers coordinator in the place of spiderpool's agent, and checks inside the pod's
// and the node's network namespaces that coordinator did what its configuration asks.
//
// `make test-coordinator` brings the stack up (or uses the one that is up), builds
// coordinator into the stack's plugin directory and runs this test. Its environment:
//
//	NICPOOL_KUBECONFIG  the local stack's admin kubeconfig (.local/kubeconfig)
//	NICPOOL_BIN         the stack's binaries, kubectl among them (bin/)
//	NICPOOL_CNI_DIR     where the stack's Multus finds the plugins of a network
//	                    (.local/bin)
package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ns is the namespace of the test's networks and pods.
const ns = "coordinator-e2e"

type env struct {
	t          *testing.T
	kubeconfig string
	bin        string
}

func setup(t *testing.T) *env {
	kubeconfig := os.Getenv("NICPOOL_KUBECONFIG")
	bin, cniDir := os.Getenv("NICPOOL_BIN"), os.Getenv("NICPOOL_CNI_DIR")
	if kubeconfig == "" || bin == "" || cniDir == "" {
		t.Fatal("NICPOOL_KUBECONFIG, NICPOOL_BIN and NICPOOL_CNI_DIR are not all set: `make test-coordinator` brings the local stack up and sets them")
	}
	e := &env{t: t, kubeconfig: kubeconfig, bin: bin}
	// spiderpool's coordinator, from spiderpool's module, where Multus finds the
	// plugins of a network.
	build := exec.Command("go", "build", "-o", filepath.Join(cniDir, "coordinator"), "github.com/spidernet-io/spiderpool/cmd/coordinator")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build spiderpool's coordinator: %v\n%s", err, out)
	}
	return e
}

func (e *env) kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(e.bin, "kubectl"), append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.String(), nil
}

func (e *env) must(stdin string, args ...string) string {
	e.t.Helper()
	out, err := e.kubectl(stdin, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// in runs a command in a network namespace of the host.
func (e *env) in(netns string, args ...string) string {
	e.t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", netns}, args...)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("in %s: %s: %v\n%s", netns, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// netns is the network namespace of the stand-in node or pod named by suffix
// ("node-NODE", "pod-UID"): the local stack names them after its process.
func (e *env) netns(suffix string) string {
	e.t.Helper()
	pid, err := os.ReadFile(filepath.Join(filepath.Dir(e.kubeconfig), "pid"))
	if err != nil {
		e.t.Fatalf("the local stack's pid: %v", err)
	}
	name := "nicpool-e2e-" + strings.TrimSpace(string(pid)) + "-" + suffix
	if _, err := os.Stat(filepath.Join("/var/run/netns", name)); err != nil {
		e.t.Fatalf("network namespace %s: %v", name, err)
	}
	return name
}

// eventually polls f until it returns "" (its last complaint is the failure).
func (e *env) eventually(what string, f func() string) {
	e.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		last = f()
		return last == "", nil
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %s", what, last)
	}
}

func contains(t *testing.T, where, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(text) {
			t.Errorf("%s has no line matching %q:\n%s", where, w, text)
		}
	}
}

const objects = `
apiVersion: v1
kind: Namespace
metadata:
  name: coordinator-e2e
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderCoordinator
metadata:
  name: default
spec:
  mode: underlay
  podCIDRType: none
  hijackCIDR: ["169.254.0.0/16"]
  podMACPrefix: "0a:1b"
  policyRoutes:
    - dst: 192.0.2.0/24
      gw: 10.10.0.1
---
# eth0 as spiderpool's underlay installs have it: macvlan with spiderpool's IPAM
# (nicpool's plugin answers to the name spiderpool), then coordinator.
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: underlay
  namespace: coordinator-e2e
spec:
  config: '{"cniVersion":"0.3.1","name":"underlay","plugins":[{"type":"macvlan","master":"eth0","mode":"bridge","ipam":{"type":"spiderpool"}},{"type":"coordinator"}]}'
---
# A second NIC: its own policy routes, given in the network.
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: underlay-net1
  namespace: coordinator-e2e
spec:
  config: '{"cniVersion":"0.3.1","name":"underlay-net1","plugins":[{"type":"macvlan","master":"eth1","mode":"bridge","ipam":{"type":"nicpool"}},{"type":"coordinator","policyRoutes":[{"dst":"198.51.100.0/24","gw":"10.20.0.1"}]}]}'
`

const pod = `
apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: coordinator-e2e
  annotations:
    v1.multus-cni.io/default-network: coordinator-e2e/underlay
    k8s.v1.cni.cncf.io/networks: coordinator-e2e/underlay-net1
    ipam.spidernet.io/ippools: '[{"interface":"eth0","ipv4":["eth0-v4"]},{"interface":"net1","ipv4":["net1-v4"]}]'
spec:
  nodeName: node-1
  containers:
    - name: c
      image: pause
`

type podStatus struct {
	Metadata struct {
		UID string `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		Phase  string `json:"phase"`
		PodIPs []struct {
			IP string `json:"ip"`
		} `json:"podIPs"`
	} `json:"status"`
}

func (e *env) pod(name string) *podStatus {
	e.t.Helper()
	var p podStatus
	if err := json.Unmarshal([]byte(e.must("", "get", "pod", "-n", ns, name, "-o", "json")), &p); err != nil {
		e.t.Fatal(err)
	}
	return &p
}

// TestCoordinatorRunsAfterNicpool: a pod whose eth0 and net1 chain macvlan with
// nicpool's IPAM then spiderpool's coordinator, in underlay mode, gets what the
// SpiderCoordinator asks for (the veth to its node, the hijacked and Service CIDRs
// through it, the routes to the node, the MAC prefix, the policy routes, the reply
// mark), its second NIC's routes in a policy table of their own, and the node routes
// to the pod through the veth; deleting the pod removes the node's side. A
// SpiderCoordinator nicpool cannot serve fails the ADD naming the field.
func TestCoordinatorRunsAfterNicpool(t *testing.T) {
	e := setup(t)
	// What an earlier run left goes first.
	e.must("", "delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=5m")
	// An underlay node has an address in its pods' subnets, which coordinator routes
	// the pod to through the veth (it asks the node's route to the pod's address). The
	// stand-in nodes have none of their own (they reach the API server through a
	// forwarder): node-1 gets one on each uplink for the test.
	nodeNS := e.netns("node-node-1")
	for _, a := range [][2]string{{"10.10.0.251/24", "eth0"}, {"10.20.0.251/24", "eth1"}} {
		e.in(nodeNS, "ip", "addr", "add", a[0], "dev", a[1])
		t.Cleanup(func() { _, _ = exec.Command("ip", "-n", nodeNS, "addr", "del", a[0], "dev", a[1]).CombinedOutput() })
	}
	e.must(objects, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = e.kubectl("", "delete", "namespace", ns, "--wait=true", "--timeout=3m")
		_, _ = e.kubectl("", "delete", "spidercoordinator", "default", "--ignore-not-found")
	})

	e.must(fmt.Sprintf(pod, "underlay-0"), "apply", "-f", "-")
	var p *podStatus
	e.eventually("pod underlay-0 running", func() string {
		p = e.pod("underlay-0")
		if p.Status.Phase != "Running" {
			ev, _ := e.kubectl("", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=underlay-0", "-o", "custom-columns=REASON:.reason,MESSAGE:.message", "--no-headers")
			return "phase " + p.Status.Phase + "; events:\n" + ev
		}
		return ""
	})
	podNS := e.netns("pod-" + p.Metadata.UID)
	addrs := e.in(podNS, "ip", "-o", "-4", "addr", "show")
	eth0IP := regexp.MustCompile(`eth0\s+inet (10\.10\.0\.\d+)/`).FindStringSubmatch(addrs)
	net1IP := regexp.MustCompile(`net1\s+inet (10\.20\.0\.\d+)/`).FindStringSubmatch(addrs)
	if eth0IP == nil || net1IP == nil {
		t.Fatalf("pod addresses: %s", addrs)
	}
	var services []string
	for _, c := range strings.Fields(e.must("", "get", "servicecidrs", "-o", "jsonpath={.items[*].spec.cidrs[*]}")) {
		if !strings.Contains(c, ":") {
			services = append(services, c)
		}
	}
	if len(services) == 0 {
		t.Fatal("the cluster has no IPv4 ServiceCIDR")
	}

	// The pod: veth0 beside eth0, eth0's MAC with the prefix, the routes through veth0.
	links := e.in(podNS, "ip", "-o", "link", "show")
	contains(t, "the pod's links", links, `\d+: veth0@if\d+: .*UP`, `\d+: eth0@if\d+: .* link/ether 0a:1b:`)
	main := e.in(podNS, "ip", "-4", "route", "show", "table", "main")
	want := []string{`(?m)^169\.254\.0\.0/16 via \S+ dev veth0`, `(?m)^\S+ dev veth0 scope link`, `(?m)^192\.0\.2\.0/24 via 10\.10\.0\.1 dev eth0`, `(?m)^default via 10\.10\.0\.1 dev eth0`}
	for _, s := range services {
		want = append(want, `(?m)^`+regexp.QuoteMeta(s)+` via \S+ dev veth0`)
	}
	contains(t, "the pod's main table", main, want...)
	rules := e.in(podNS, "ip", "-4", "rule", "show")
	contains(t, "the pod's rules", rules, `from all fwmark 0x1 lookup 100`, `from `+regexp.QuoteMeta(net1IP[1])+` lookup (\d+)`)
	contains(t, "the pod's table 100", e.in(podNS, "ip", "-4", "route", "show", "table", "100"), `(?m)^default via \S+ dev veth0`)
	contains(t, "the pod's mangle table", e.in(podNS, "iptables", "-t", "mangle", "-S"), `-A PREROUTING -i veth0 -m conntrack --ctstate NEW -j MARK --set-xmark 0x1`)
	// net1: its routes, its default route included, moved into a table of its own,
	// looked up for its address, with its network's policy route; the pod's default
	// route stays on eth0.
	if m := regexp.MustCompile(`from ` + regexp.QuoteMeta(net1IP[1]) + ` lookup (\d+)`).FindStringSubmatch(rules); m != nil {
		table := e.in(podNS, "ip", "-4", "route", "show", "table", m[1])
		contains(t, "net1's table "+m[1], table,
			`(?m)^default via 10\.20\.0\.1 dev net1`, `(?m)^10\.20\.0\.0/24 dev net1`, `(?m)^198\.51\.100\.0/24 via 10\.20\.0\.1 dev net1`, `(?m)^169\.254\.0\.0/16 via \S+ dev veth0`)
		if regexp.MustCompile(`(?m)^default .*dev net1`).MatchString(main) {
			t.Errorf("net1's default route stayed in the pod's main table:\n%s", main)
		}
		t.Logf("pod %s: rules\n%s\nmain table\n%s\ntable %s (net1)\n%s", p.Metadata.UID, rules, main, m[1], table)
	}

	// The node: its veth to the pod, a rule to table 500 and the pod's addresses there.
	contains(t, "the node's rules", e.in(nodeNS, "ip", "-4", "rule", "show"), `(?m)^1000:\s+from all lookup 500`)
	table500 := e.in(nodeNS, "ip", "-4", "route", "show", "table", "500")
	contains(t, "the node's table 500", table500, `(?m)^`+regexp.QuoteMeta(eth0IP[1])+` dev (veth\w+)`, `(?m)^`+regexp.QuoteMeta(net1IP[1])+` dev veth\w+`)
	hostVeth := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(eth0IP[1]) + ` dev (veth\w+)`).FindStringSubmatch(table500)

	// A SpiderCoordinator nicpool cannot serve: the next ADD fails, naming the field.
	e.must("", "patch", "spidercoordinator", "default", "--type", "merge", "-p", `{"spec":{"podCIDRType":"calico"}}`)
	e.must(fmt.Sprintf(pod, "refused-0"), "apply", "-f", "-")
	e.eventually("the ADD of refused-0 failing with coordinator's error", func() string {
		ev, _ := e.kubectl("", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=refused-0,reason=FailedCreatePodSandBox", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "spec.podCIDRType") || !strings.Contains(ev, "GetCoordinatorConfig") {
			return "events: " + ev
		}
		return ""
	})
	if p := e.pod("refused-0"); p.Status.Phase == "Running" {
		t.Errorf("refused-0 runs although its coordinator could not be configured")
	}
	e.must("", "patch", "spidercoordinator", "default", "--type", "merge", "-p", `{"spec":{"podCIDRType":"none"}}`)

	// Deleting the pod: coordinator's DEL removes the node's side.
	e.must("", "delete", "pod", "-n", ns, "underlay-0", "--wait=true", "--timeout=3m")
	after := e.in(nodeNS, "ip", "-4", "route", "show", "table", "500")
	if strings.Contains(after, eth0IP[1]+" ") {
		t.Errorf("the node still routes %s after the pod's deletion:\n%s", eth0IP[1], after)
	}
	if hostVeth != nil && strings.Contains(e.in(nodeNS, "ip", "-o", "link", "show"), hostVeth[1]+"@") {
		t.Errorf("the node still has %s after the pod's deletion", hostVeth[1])
	}
}
