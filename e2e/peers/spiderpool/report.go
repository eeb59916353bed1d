// Package spiderpool runs spiderpool's own end-to-end suites (github.com/spidernet-io/
// spiderpool v1.2.2, test/e2e: the packages whose specs exercise IPAM) against the
// local stack of `make up`, and holds their results against a committed list of the
// specs expected not to pass, each with its reason (expected.yaml).
//
// It is a module of its own so that spiderpool's dependencies never reach nicpool's
// go.mod. Nothing of spiderpool is copied: the suites are compiled from the module
// (`go test -c` of spiderpool's packages, which this module requires), and run with
// the environment spiderpool's e2e framework (github.com/spidernet-io/e2eframework)
// reads. fixtures.yaml creates the networks and pools the specs expect by name.
//
// The harness is TestSpiderpoolE2E (`make test-spiderpool`); the comparison of
// Ginkgo's JSON reports with the list is this file's, tested on its own.
package spiderpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onsi/ginkgo/v2/types"
	"sigs.k8s.io/yaml"
)

// Outcome is what a spec did, as the list names it.
type Outcome string

// The outcomes a spec's run can have.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
	// Excluded specs are not run at all (Ginkgo's --skip): they would hang the suite
	// on the local stack.
	Excluded Outcome = "excluded"
)

// Expectation is one spec that is expected not to pass.
type Expectation struct {
	// Suite is spiderpool's package under test/e2e (ippoolcr, annotation, ...).
	Suite string `json:"suite"`
	// Spec is the spec's full text: its containers' texts and its own, joined by
	// one space, as Ginkgo prints it.
	Spec string `json:"spec"`
	// Labels are the spec's Ginkgo labels (spiderpool's case IDs), for people.
	Labels []string `json:"labels,omitempty"`
	// Outcome is failed, skipped (spiderpool's own Skip) or excluded (not run: the
	// spec would hang its suite).
	Outcome Outcome `json:"outcome"`
	// Reason is a key of Expectations.Reasons.
	Reason string `json:"reason"`
	// Detail says what the spec does that nicpool's stack does not, and where it
	// stops.
	Detail string `json:"detail"`
}

// Expectations is expected.yaml: the reasons and the specs expected not to pass, and
// which specs run on real kubelet nodes.
type Expectations struct {
	Reasons map[string]string `json:"reasons"`
	Specs   []Expectation     `json:"specs"`
	Kubelet KubeletSpecs      `json:"kubelet"`
}

// Node is the kind of node a pass of the suites runs on: make up's NODE.
type Node string

// The passes: every spec runs in one of them.
const (
	// StandIn nodes run every spec but those of Expectations.Kubelet.
	StandIn Node = "standin"
	// Kubelet nodes (make up NODE=kubelet) run the specs of Expectations.Kubelet,
	// which need what only a real node has.
	Kubelet Node = "kubelet"
)

// KubeletSpecs are the specs that run on real kubelet nodes, each with what of a real
// node it needs (a key of Needs). A spec listed here that does not pass there either
// is in Specs too, with the reason it does not.
type KubeletSpecs struct {
	Needs map[string]string `json:"needs"`
	Specs []KubeletSpec     `json:"specs"`
}

// KubeletSpec is one spec of the kubelet pass.
type KubeletSpec struct {
	Suite  string   `json:"suite"`
	Spec   string   `json:"spec"`
	Labels []string `json:"labels,omitempty"`
	Needs  string   `json:"needs"`
}

// NodeOf is the pass a spec runs in.
func (e *Expectations) NodeOf(suite, spec string) Node {
	for _, k := range e.Kubelet.Specs {
		if k.Suite == suite && k.Spec == spec {
			return Kubelet
		}
	}
	return StandIn
}

// OnKubelet are the full texts of the suite's specs that run on kubelet nodes.
func (e *Expectations) OnKubelet(suite string) []string {
	var out []string
	for _, k := range e.Kubelet.Specs {
		if k.Suite == suite {
			out = append(out, k.Spec)
		}
	}
	return out
}

// ParseNode reads SPIDERPOOL_NODE (default standin).
func ParseNode(v string) (Node, error) {
	switch Node(v) {
	case "", StandIn:
		return StandIn, nil
	case Kubelet:
		return Kubelet, nil
	}
	return "", fmt.Errorf("SPIDERPOOL_NODE=%q: want %s or %s (make's NODE)", v, StandIn, Kubelet)
}

// ReadExpectations reads and validates a list.
func ReadExpectations(path string) (*Expectations, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var e Expectations
	if err := yaml.UnmarshalStrict(data, &e); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &e, nil
}

// Validate checks that every entry names a suite, a spec, an outcome other than
// passed, a reason the list defines and a detail, that no spec is listed twice, and
// that every reason is some spec's (a reason whose last spec started passing goes).
func (e *Expectations) Validate() error {
	var errs []error
	seen := map[string]bool{}
	used := map[string]bool{}
	for _, x := range e.Specs {
		used[x.Reason] = true
	}
	for _, r := range slices.Sorted(maps.Keys(e.Reasons)) {
		if !used[r] {
			errs = append(errs, fmt.Errorf("reasons.%s: no spec is listed with this reason: remove it", r))
		}
	}
	for i, x := range e.Specs {
		where := fmt.Sprintf("specs[%d] (%s: %q)", i, x.Suite, x.Spec)
		if x.Suite == "" || x.Spec == "" {
			errs = append(errs, fmt.Errorf("%s: suite and spec are required", where))
		}
		if x.Outcome != Failed && x.Outcome != Skipped && x.Outcome != Excluded {
			errs = append(errs, fmt.Errorf("%s: outcome %q: must be failed, skipped or excluded", where, x.Outcome))
		}
		if _, ok := e.Reasons[x.Reason]; !ok {
			errs = append(errs, fmt.Errorf("%s: reason %q is not one of reasons", where, x.Reason))
		}
		if strings.TrimSpace(x.Detail) == "" {
			errs = append(errs, fmt.Errorf("%s: detail is required: say what the spec needs and where it stops", where))
		}
		k := key(x.Suite, x.Spec)
		if seen[k] {
			errs = append(errs, fmt.Errorf("%s: listed twice", where))
		}
		seen[k] = true
		if x.Outcome == Excluded && e.NodeOf(x.Suite, x.Spec) == Kubelet {
			errs = append(errs, fmt.Errorf("%s: excluded, and listed under kubelet to run there: an excluded spec runs nowhere", where))
		}
	}
	needed := map[string]bool{}
	onKubelet := map[string]bool{}
	for i, k := range e.Kubelet.Specs {
		where := fmt.Sprintf("kubelet.specs[%d] (%s: %q)", i, k.Suite, k.Spec)
		needed[k.Needs] = true
		if k.Suite == "" || k.Spec == "" {
			errs = append(errs, fmt.Errorf("%s: suite and spec are required", where))
		}
		if _, ok := e.Kubelet.Needs[k.Needs]; !ok {
			errs = append(errs, fmt.Errorf("%s: needs %q is not one of kubelet.needs", where, k.Needs))
		}
		if onKubelet[key(k.Suite, k.Spec)] {
			errs = append(errs, fmt.Errorf("%s: listed twice", where))
		}
		onKubelet[key(k.Suite, k.Spec)] = true
	}
	for _, n := range slices.Sorted(maps.Keys(e.Kubelet.Needs)) {
		if !needed[n] {
			errs = append(errs, fmt.Errorf("kubelet.needs.%s: no spec needs it: remove it", n))
		}
	}
	return errors.Join(errs...)
}

// Result is one spec's run.
type Result struct {
	Suite, Spec string
	Labels      []string
	Outcome     Outcome
	// Message is the failure's or skip's message; Location where it happened.
	Message, Location string
	RunTime           time.Duration
}

// suiteNodes are the suite-level nodes whose failure stops a whole suite.
var suiteNodes = types.NodeTypeBeforeSuite | types.NodeTypeSynchronizedBeforeSuite |
	types.NodeTypeAfterSuite | types.NodeTypeSynchronizedAfterSuite | types.NodeTypeReportAfterSuite

// ReadReport reads the results of suite from Ginkgo's JSON report (--ginkgo.json-
// report). Pending specs are left out (spiderpool marks them so; they never run), and
// so are specs a focus filtered out (skipped without a message). A suite-level node
// that did not pass is a result of its own, named by its node type.
func ReadReport(suite, path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(reports) == 0 {
		return nil, fmt.Errorf("%s: no suite in the report", path)
	}
	var out []Result
	for _, r := range reports {
		if len(r.SpecialSuiteFailureReasons) > 0 {
			// Interrupted or timed out: the specs it did not reach are not in the
			// report, and must not pass for not run.
			out = append(out, Result{Suite: suite, Spec: "[suite]", Outcome: Failed, Message: strings.Join(r.SpecialSuiteFailureReasons, "; ")})
		}
		for _, s := range r.SpecReports {
			switch {
			case s.LeafNodeType == types.NodeTypeIt:
				if s.State == types.SpecStatePending || (s.State == types.SpecStateSkipped && s.Failure.Message == "") {
					continue
				}
				out = append(out, result(suite, s.FullText(), s))
			case suiteNodes.Is(s.LeafNodeType) && !s.State.Is(types.SpecStatePassed|types.SpecStateSkipped):
				out = append(out, result(suite, "["+s.LeafNodeType.String()+"]", s))
			}
		}
	}
	return out, nil
}

func result(suite, spec string, s types.SpecReport) Result {
	r := Result{Suite: suite, Spec: spec, Labels: s.Labels(), RunTime: s.RunTime, Message: s.Failure.Message}
	switch {
	case s.State == types.SpecStatePassed:
		r.Outcome = Passed
	case s.State == types.SpecStateSkipped:
		r.Outcome = Skipped
	default:
		// failed, panicked, timed out, interrupted, aborted: the spec did not pass.
		r.Outcome = Failed
	}
	if s.State.Is(types.SpecStateFailureStates) {
		r.Location = moduleRelative(s.Failure.Location.String())
		if s.Failure.FailureNodeType != types.NodeTypeIt && s.Failure.FailureNodeType != types.NodeTypeInvalid {
			r.Message = fmt.Sprintf("[%s] %s", s.Failure.FailureNodeType, r.Message)
		}
	}
	return r
}

// Excluded are the full texts of the suite's specs the list excludes from running.
func (e *Expectations) Excluded(suite string) []string {
	var out []string
	for _, x := range e.Specs {
		if x.Suite == suite && x.Outcome == Excluded {
			out = append(out, x.Spec)
		}
	}
	return out
}

// Match is a result and the entry that lists it.
type Match struct {
	Result
	Expected Expectation
}

// Verdict is a run held against the list.
type Verdict struct {
	// Node is the pass's kind of node.
	Node Node
	// Passed are the specs that passed and are not listed.
	Passed []Result
	// AsExpected are listed specs that did what the list says.
	AsExpected []Match
	// Unexpected are specs that failed or skipped and are not listed.
	Unexpected []Result
	// NowPassing are listed specs that passed: the list is stale.
	NowPassing []Match
	// Changed are listed specs that did not pass, but not as listed (failed where
	// the list says skipped, or the other way).
	Changed []Match
	// NotRun are listed specs the run did not report (checked on complete runs only).
	NotRun []Expectation
}

// Compare holds the results of a pass on node against the list. complete says the
// run covered every listed suite without a focus, so that a listed spec of that pass
// the run did not report is an error (renamed or removed upstream).
func Compare(e *Expectations, results []Result, complete bool, node Node) Verdict {
	listed := map[string]Expectation{}
	for _, x := range e.Specs {
		listed[key(x.Suite, x.Spec)] = x
	}
	v := Verdict{Node: node}
	seen := map[string]bool{}
	for _, r := range results {
		k := key(r.Suite, r.Spec)
		seen[k] = true
		x, ok := listed[k]
		switch {
		case !ok && r.Outcome == Passed:
			v.Passed = append(v.Passed, r)
		case !ok:
			v.Unexpected = append(v.Unexpected, r)
		case r.Outcome == Passed:
			v.NowPassing = append(v.NowPassing, Match{r, x})
		case r.Outcome != x.Outcome:
			v.Changed = append(v.Changed, Match{r, x})
		default:
			v.AsExpected = append(v.AsExpected, Match{r, x})
		}
	}
	if complete {
		for _, x := range e.Specs {
			if x.Outcome != Excluded && e.NodeOf(x.Suite, x.Spec) == node && !seen[key(x.Suite, x.Spec)] {
				v.NotRun = append(v.NotRun, x)
				seen[key(x.Suite, x.Spec)] = true
			}
		}
		for _, k := range e.Kubelet.Specs {
			if node == Kubelet && !seen[key(k.Suite, k.Spec)] {
				v.NotRun = append(v.NotRun, Expectation{Suite: k.Suite, Spec: k.Spec, Labels: k.Labels, Reason: "kubelet: " + k.Needs})
			}
		}
	}
	return v
}

// OK says the run is what the list says: nothing failed or skipped unlisted,
// nothing listed passed or changed, nothing listed went missing.
func (v Verdict) OK() bool {
	return len(v.Unexpected)+len(v.NowPassing)+len(v.Changed)+len(v.NotRun) == 0
}

// Print writes the counts (passed, expected by reason) and every spec that makes
// the run fail, each with what to do.
func (v Verdict) Print(w io.Writer, e *Expectations) {
	total := len(v.Passed) + len(v.AsExpected) + len(v.Unexpected) + len(v.NowPassing) + len(v.Changed)
	fmt.Fprintf(w, "spiderpool e2e on %s nodes: %d specs run: %d passed, %d not passing as listed", v.Node, total, len(v.Passed)+len(v.NowPassing), len(v.AsExpected))
	fmt.Fprintf(w, ", %d failed or skipped unlisted, %d listed but passing, %d listed but changed, %d listed but not run\n",
		len(v.Unexpected), len(v.NowPassing), len(v.Changed), len(v.NotRun))
	byReason := map[string]int{}
	for _, m := range v.AsExpected {
		byReason[m.Expected.Reason]++
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, r := range reasons {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", byReason[r], r, e.Reasons[r])
	}
	_ = tw.Flush()
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	var lines []string
	for _, r := range v.Unexpected {
		lines = append(lines, fmt.Sprintf("%s %s %q %v (%s): %s at %s", r.Outcome, r.Suite, r.Spec, r.Labels, r.RunTime.Round(time.Second), oneLine(r.Message), r.Location))
	}
	section("failed or skipped, not listed in expected.yaml (fix nicpool, or list the spec with its reason)", lines)
	lines = nil
	for _, m := range v.NowPassing {
		lines = append(lines, fmt.Sprintf("%s %q %v (listed: %s)", m.Suite, m.Spec, m.Labels, m.Expected.Reason))
	}
	section("passing, but listed in expected.yaml as not passing (remove them from the list)", lines)
	lines = nil
	for _, m := range v.Changed {
		lines = append(lines, fmt.Sprintf("%s %s %q (listed as %s, %s): %s at %s", m.Outcome, m.Suite, m.Spec, m.Expected.Outcome, m.Expected.Reason, oneLine(m.Message), m.Location))
	}
	section("not passing, but not as listed in expected.yaml", lines)
	lines = nil
	for _, x := range v.NotRun {
		lines = append(lines, fmt.Sprintf("%s %q (%s)", x.Suite, x.Spec, x.Reason))
	}
	section("listed in expected.yaml, but not run (renamed or removed upstream?)", lines)
}

// moduleRelative shortens a location in the module cache to the file of spiderpool's
// (or its framework's) module it is in.
func moduleRelative(loc string) string {
	if i := strings.Index(loc, "github.com/spidernet-io/"); i >= 0 {
		return loc[i:]
	}
	return loc
}

func key(suite, spec string) string { return suite + "\x00" + spec }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 400 {
		s = string(r[:400]) + "…"
	}
	return s
}

// Suites are spiderpool's packages under test/e2e whose specs exercise IPAM and need
// no spiderpool component of their own. The others (coordinator, ifacer, kruise,
// kubevirt, podwebhook, reliability, spidercoordinator, spidermultus, subnet,
// iaasnetworkprovider, networkresourceplugin, performance) test spiderpool's
// controller, agent, coordinator, SpiderSubnet or SpiderMultusConfig, or need
// OpenKruise, KubeVirt or an IaaS provider.
var Suites = []string{"ippoolcr", "annotation", "affinity", "assignip", "reclaim", "reservedip"}

// SuitePackage is the import path of a suite.
func SuitePackage(suite string) string {
	return "github.com/spidernet-io/spiderpool/test/e2e/" + suite
}

// IsSuite says whether name is one of Suites.
func IsSuite(name string) bool { return slices.Contains(Suites, name) }
