package spiderpool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The harness's environment (make test-spiderpool sets the first):
//
//	NICPOOL_KUBECONFIG   the local stack's admin kubeconfig (.local/kubeconfig)
//	SPIDERPOOL_NODE      the pass: standin (default) runs every spec but those
//	                     expected.yaml lists under kubelet, on stand-in nodes;
//	                     kubelet runs those alone, on real kubelet nodes (make's NODE)
//	SPIDERPOOL_E2E_DIR   where the suites' logs and JSON reports go, under a folder
//	                     named for the pass (default: a temporary directory, removed
//	                     afterwards)
//	SPIDERPOOL_SUITES    a space-separated subset of Suites
//	SPIDERPOOL_FOCUS     a Ginkgo focus (regular expression over the specs' texts; in
//	                     the kubelet pass, it picks among the kubelet specs' texts)
//	SPIDERPOOL_LABELS    a Ginkgo label filter (spiderpool's case IDs, e.g. D00014)
//	SPIDERPOOL_PARALLEL  how many suites run at once (default 3)
//
// A run with a subset, a focus or a label filter checks the specs it ran only.

// suiteTimeout bounds one suite's run (Ginkgo's own --timeout, so that it still
// writes its report); its specs wait at most a few minutes each.
const suiteTimeout = 40 * time.Minute

// TestSpiderpoolE2E creates spiderpool's fixtures on the stack, compiles spiderpool's
// suites from its module, runs each against the stack (the specs of the pass
// SPIDERPOOL_NODE names, on a stack of that kind of node) and fails unless every spec
// passes or does what expected.yaml says, for the reason it gives.
func TestSpiderpoolE2E(t *testing.T) {
	kubeconfig := os.Getenv("NICPOOL_KUBECONFIG")
	if kubeconfig == "" {
		t.Fatal("NICPOOL_KUBECONFIG is not set: `make test-spiderpool` brings the local stack up and sets it (or `make up`, then NICPOOL_KUBECONFIG=$PWD/.local/kubeconfig)")
	}
	kubeconfig, err := filepath.Abs(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := ReadExpectations("expected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	node, err := ParseNode(os.Getenv("SPIDERPOOL_NODE"))
	if err != nil {
		t.Fatal(err)
	}
	suites, complete, err := selectedSuites(os.Getenv("SPIDERPOOL_SUITES"))
	if err != nil {
		t.Fatal(err)
	}
	focus, labels := os.Getenv("SPIDERPOOL_FOCUS"), os.Getenv("SPIDERPOOL_LABELS")
	complete = complete && focus == "" && labels == ""
	runs, err := passRuns(exp, node, suites, focus, labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 {
		t.Fatalf("SPIDERPOOL_SUITES=%q and SPIDERPOOL_FOCUS=%q select no spec of the %s pass", os.Getenv("SPIDERPOOL_SUITES"), focus, node)
	}
	dir := os.Getenv("SPIDERPOOL_E2E_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if dir, err = filepath.Abs(dir); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(dir, string(node))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	var nodeNames []string
	for _, n := range nodes.Items {
		nodeNames = append(nodeNames, n.Name)
		if kind := nodeKind(n); kind != node {
			t.Fatalf("node %s of the local cluster that is up is a %s node; the %s pass needs %s nodes: `make down` first, or run the pass its nodes are for (SPIDERPOOL_NODES=%s)", n.Name, kind, node, node, kind)
		}
	}
	slices.Sort(nodeNames)

	if err := applyFixtures(ctx, c, "fixtures.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := removeLeftovers(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := untaintNodes(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The NADs of the specs' SpiderMultusConfigs (multusconfig.go), while they run.
	if err := installMultusConfigCRD(ctx, c); err != nil {
		t.Fatal(err)
	}
	watcher, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	smcCtx, stopSMC := context.WithCancel(ctx)
	smcDone := make(chan struct{})
	go func() {
		defer close(smcDone)
		serveMultusConfigs(smcCtx, watcher, t.Logf)
	}()
	defer func() { stopSMC(); <-smcDone }()
	start := time.Now()
	var suiteNames []string
	for _, r := range runs {
		suiteNames = append(suiteNames, r.suite)
	}
	bins, err := build(ctx, dir, suiteNames)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compiled %d suites of spiderpool in %s", len(suiteNames), time.Since(start).Round(time.Second))

	env := append(os.Environ(), frameworkEnv(kubeconfig, nodeNames)...)
	parallel, err := parallelism(os.Getenv("SPIDERPOOL_PARALLEL"))
	if err != nil {
		t.Fatal(err)
	}
	// The suites run side by side, each in a process of its own and namespaces of
	// its own (spiderpool runs its suites with several Ginkgo processes too); most of
	// a suite's time is waiting for what a spec expects not to happen.
	var (
		mu      sync.Mutex
		results []Result
		wg      sync.WaitGroup
		slots   = make(chan struct{}, parallel)
	)
	run := func(r suiteRun, name, what string, env []string) {
		start := time.Now()
		res, err := runSuite(ctx, r, name, bins[r.suite], logDir, env)
		if err != nil {
			t.Errorf("suite %s%s: %v", r.suite, what, err)
			return
		}
		passed := 0
		for _, r := range res {
			if r.Outcome == Passed {
				passed++
			}
		}
		t.Logf("suite %s%s on %s nodes: %d specs, %d passed, in %s (log: %s)", r.suite, what, node, len(res), passed, time.Since(start).Round(time.Second), filepath.Join(logDir, name+".log"))
		mu.Lock()
		results = append(results, res...)
		mu.Unlock()
	}
	var oneNode *suiteRun
	for _, r := range runs {
		if node == StandIn && r.suite == oneNodeSuite {
			one := r
			one.labels = labelsAnd(r.labels, oneNodeLabel)
			oneNode = &one
			r.labels = labelsAnd(r.labels, "!"+oneNodeLabel)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			run(r, r.suite, "", env)
		}()
	}
	wg.Wait()
	// The specs that need one schedulable node (nodes.go), alone on the cluster.
	if oneNode != nil {
		keep := nodeNames[0]
		untaint := func() {
			if err := untaintNodes(context.WithoutCancel(ctx), c); err != nil {
				t.Errorf("after the one-node specs: %v", err)
			}
		}
		if err := taintNodes(ctx, c, nodeNames, keep); err != nil {
			untaint()
			t.Fatal(err)
		}
		run(*oneNode, oneNodeSuite+"-one-node", " on node "+keep+" alone",
			append(os.Environ(), frameworkEnv(kubeconfig, []string{keep})...))
		untaint()
	}
	v := Compare(exp, results, complete && !t.Failed(), node)
	var out bytes.Buffer
	v.Print(&out, exp)
	t.Log("\n" + out.String())
	if !v.OK() {
		t.Error("the run differs from expected.yaml (above)")
	}
}

// selectedSuites reads SPIDERPOOL_SUITES; complete says it selects every suite.
func selectedSuites(list string) ([]string, bool, error) {
	if strings.TrimSpace(list) == "" {
		return Suites, true, nil
	}
	var out []string
	for _, s := range strings.Fields(list) {
		if !IsSuite(s) {
			return nil, false, fmt.Errorf("SPIDERPOOL_SUITES: %q is not one of %s", s, strings.Join(Suites, " "))
		}
		out = append(out, s)
	}
	return out, len(out) == len(Suites), nil
}

// suiteRun is what one suite's binary runs in a pass.
type suiteRun struct {
	suite string
	// focus is a Ginkgo focus (SPIDERPOOL_FOCUS), only the full texts of the specs
	// to run (the kubelet pass's), skip those of the specs not to run (the excluded,
	// and on stand-in nodes the kubelet pass's); labels a Ginkgo label filter.
	focus, labels string
	only, skip    []string
}

// passRuns are the runs of a pass: on stand-in nodes every selected suite, its
// excluded specs and its kubelet specs skipped; on kubelet nodes the suites with
// kubelet specs, those specs alone (those whose text focus matches, when one is set).
func passRuns(exp *Expectations, node Node, suites []string, focus, labels string) ([]suiteRun, error) {
	var focusRE *regexp.Regexp
	if focus != "" {
		var err error
		if focusRE, err = regexp.Compile(focus); err != nil {
			return nil, fmt.Errorf("SPIDERPOOL_FOCUS: %w", err)
		}
	}
	var runs []suiteRun
	for _, suite := range suites {
		run := suiteRun{suite: suite, labels: labels, skip: exp.Excluded(suite)}
		switch node {
		case StandIn:
			run.focus = focus
			run.skip = append(run.skip, exp.OnKubelet(suite)...)
		case Kubelet:
			for _, spec := range exp.OnKubelet(suite) {
				if focusRE == nil || focusRE.MatchString(spec) {
					run.only = append(run.only, spec)
				}
			}
			if len(run.only) == 0 {
				continue
			}
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// nodeKind is the pass a node of the cluster serves: a stand-in node says so in its
// container runtime's version (e2e/node), a real one names containerd.
func nodeKind(n corev1.Node) Node {
	if strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "nicpool-e2e://") {
		return StandIn
	}
	return Kubelet
}

// specsPattern is a Ginkgo focus or skip matching exactly the specs of these full
// texts: Ginkgo matches them against the suite's description, a space and the
// spec's full text.
func specsPattern(specs []string) string {
	quoted := make([]string, len(specs))
	for i, spec := range specs {
		quoted[i] = " " + regexp.QuoteMeta(spec) + "$"
	}
	return strings.Join(quoted, "|")
}

// parallelism reads SPIDERPOOL_PARALLEL: how many suites run at once (default 3).
func parallelism(v string) (int, error) {
	if v == "" {
		return 3, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("SPIDERPOOL_PARALLEL=%q: want a number of suites, at least 1", v)
	}
	return n, nil
}

// frameworkEnv is the environment spiderpool's e2e framework and common package read
// (e2eframework's framework.go, spiderpool's test/Makefile e2e_test target and
// test/e2e/common/mode.go), describing the local stack: dual stack, Multus with
// spiderpool's network names in kube-system, spiderpool's IPAM (nicpool serves its
// API), no SpiderSubnet, no overlay CNI, no DRA, no IaaS provider.
func frameworkEnv(kubeconfig string, nodes []string) []string {
	return []string{
		"E2E_CLUSTER_NAME=nicpool-local",
		"E2E_KUBECONFIG_PATH=" + kubeconfig,
		"E2E_IPV4_ENABLED=true",
		"E2E_IPV6_ENABLED=true",
		"E2E_MULTUS_CNI_ENABLED=true",
		"E2E_SPIDERPOOL_IPAM_ENABLED=true",
		"E2E_WHEREABOUT_IPAM_ENABLED=false",
		// spiderpool's Makefile passes its kind nodes' container names; the specs
		// count nodes with it (and `docker exec` into them, which no node here has).
		"E2E_KIND_CLUSTER_NODE_LIST=" + strings.Join(nodes, ","),
		"E2E_Multus_DefaultCni=macvlan-vlan0",
		"E2E_Multus_AdditionalCni=macvlan-vlan100",
		"E2E_SPIDERSUBNET_ENABLED=false",
		"E2E_SPIDERPOOL_ENABLE_SUBNET=false",
		"RELEASE_NAMESPACE=kube-system",
		"INSTALL_OVERLAY_CNI=false",
		"INSTALL_CALICO=false",
		"INSTALL_CILIUM=false",
		"E2E_SPIDERPOOL_ENABLE_DRA=false",
		"E2E_IAAS_NETWORK_PROVIDER_ENABLED=false",
	}
}

// applyFixtures creates or updates the objects of a multi-document YAML file
// (server-side apply).
func applyFixtures(ctx context.Context, c client.Client, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner("spiderpool-e2e"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// build compiles the suites' test binaries from spiderpool's module into dir.
func build(ctx context.Context, dir string, suites []string) (map[string]string, error) {
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"test", "-c", "-o", binDir + string(filepath.Separator)}
	bins := map[string]string{}
	for _, s := range suites {
		args = append(args, SuitePackage(s))
		bins[s] = filepath.Join(binDir, s+".test")
	}
	cmd := exec.CommandContext(ctx, goTool(), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bins, nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// runSuite runs one suite's binary and reads its report; name is that of the run's log
// and report in dir. The binary's exit status
// is not looked at: the report says which specs failed.
func runSuite(ctx context.Context, run suiteRun, name, bin, dir string, env []string) ([]Result, error) {
	suite := run.suite
	report := filepath.Join(dir, name+".json")
	_ = os.Remove(report)
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := []string{
		"-test.timeout=0",
		"--ginkgo.json-report=" + report,
		"--ginkgo.timeout=" + suiteTimeout.String(),
		"--ginkgo.v",
		"--ginkgo.no-color",
	}
	if run.focus != "" {
		args = append(args, "--ginkgo.focus="+run.focus)
	}
	if len(run.only) > 0 {
		args = append(args, "--ginkgo.focus="+specsPattern(run.only))
	}
	if run.labels != "" {
		args = append(args, "--ginkgo.label-filter="+run.labels)
	}
	if len(run.skip) > 0 {
		args = append(args, "--ginkgo.skip="+specsPattern(run.skip))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	runErr := cmd.Run()
	res, err := ReadReport(suite, report)
	if err != nil {
		return nil, fmt.Errorf("no report (%v): %w; see %s", runErr, err, log.Name())
	}
	return res, nil
}
