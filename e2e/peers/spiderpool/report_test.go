package spiderpool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

// writeReport writes a Ginkgo JSON report of one suite with the given specs.
func writeReport(t *testing.T, specs ...types.SpecReport) string {
	t.Helper()
	data, err := json.Marshal([]types.Report{{SuitePath: "x", SpecReports: specs}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func spec(container, text string, state types.SpecState, msg string) types.SpecReport {
	return types.SpecReport{
		ContainerHierarchyTexts: []string{container},
		LeafNodeType:            types.NodeTypeIt,
		LeafNodeText:            text,
		State:                   state,
		Failure:                 types.Failure{Message: msg, FailureNodeType: types.NodeTypeIt},
	}
}

func TestReadReport(t *testing.T) {
	path := writeReport(t,
		spec("pools", "a passes", types.SpecStatePassed, ""),
		spec("pools", "b fails", types.SpecStateFailed, "boom"),
		spec("pools", "c times out", types.SpecStateTimedout, "late"),
		spec("pools", "d skips itself", types.SpecStateSkipped, "no subnet"),
		spec("pools", "e is filtered out", types.SpecStateSkipped, ""),
		spec("pools", "f is pending", types.SpecStatePending, ""),
		types.SpecReport{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStateFailed, Failure: types.Failure{Message: "no kubeconfig"}},
	)
	got, err := ReadReport("ippoolcr", path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Outcome{
		"pools a passes":       Passed,
		"pools b fails":        Failed,
		"pools c times out":    Failed,
		"pools d skips itself": Skipped,
		"[BeforeSuite]":        Failed,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for _, r := range got {
		if r.Suite != "ippoolcr" || want[r.Spec] != r.Outcome {
			t.Errorf("%s %q: %s, want %s", r.Suite, r.Spec, r.Outcome, want[r.Spec])
		}
	}
}

func TestCompare(t *testing.T) {
	e := &Expectations{
		Reasons: map[string]string{"admission": "refused at admission"},
		Specs: []Expectation{
			{Suite: "s", Spec: "listed fails", Outcome: Failed, Reason: "admission", Detail: "d"},
			{Suite: "s", Spec: "listed passes", Outcome: Failed, Reason: "admission", Detail: "d"},
			{Suite: "s", Spec: "listed skips", Outcome: Skipped, Reason: "admission", Detail: "d"},
			{Suite: "s", Spec: "listed fails but skips", Outcome: Failed, Reason: "admission", Detail: "d"},
			{Suite: "s", Spec: "listed not run", Outcome: Failed, Reason: "admission", Detail: "d"},
		},
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	results := []Result{
		{Suite: "s", Spec: "passes", Outcome: Passed},
		{Suite: "s", Spec: "fails", Outcome: Failed},
		{Suite: "s", Spec: "skips", Outcome: Skipped},
		{Suite: "s", Spec: "listed fails", Outcome: Failed},
		{Suite: "s", Spec: "listed passes", Outcome: Passed},
		{Suite: "s", Spec: "listed skips", Outcome: Skipped},
		{Suite: "s", Spec: "listed fails but skips", Outcome: Skipped},
		// The same text in another suite is another spec.
		{Suite: "t", Spec: "listed fails", Outcome: Passed},
	}
	v := Compare(e, results, true, StandIn)
	count := func(name string, got, want int) {
		if got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
	count("passed", len(v.Passed), 2)
	count("as expected", len(v.AsExpected), 2)
	count("unexpected", len(v.Unexpected), 2)
	count("now passing", len(v.NowPassing), 1)
	count("changed", len(v.Changed), 1)
	count("not run", len(v.NotRun), 1)
	if v.OK() {
		t.Error("a run with unexpected failures is OK")
	}
	var b strings.Builder
	v.Print(&b, e)
	for _, s := range []string{"8 specs run", "not listed in expected.yaml", "remove them from the list", "listed but not run"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("printed verdict lacks %q:\n%s", s, b.String())
		}
	}

	// A focused run does not miss the specs it did not run.
	v = Compare(e, results[3:4], false, StandIn)
	if !v.OK() || len(v.AsExpected) != 1 {
		t.Errorf("focused run on a listed failure: %+v", v)
	}
}

// Each pass answers for its own specs: the stand-in pass does not miss the specs of
// the kubelet pass, which misses a kubelet spec it did not report, passing or listed.
func TestComparePasses(t *testing.T) {
	e := &Expectations{
		Reasons: map[string]string{"docker": "docker exec into a kind node"},
		Specs: []Expectation{
			{Suite: "s", Spec: "kubelet fails", Outcome: Failed, Reason: "docker", Detail: "d"},
			{Suite: "s", Spec: "standin fails", Outcome: Failed, Reason: "docker", Detail: "d"},
		},
		Kubelet: KubeletSpecs{
			Needs: map[string]string{"exec": "kubectl exec"},
			Specs: []KubeletSpec{
				{Suite: "s", Spec: "kubelet fails", Needs: "exec"},
				{Suite: "s", Spec: "kubelet passes", Needs: "exec"},
			},
		},
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := e.OnKubelet("s"); len(got) != 2 || e.NodeOf("s", "standin fails") != StandIn || e.NodeOf("s", "kubelet passes") != Kubelet {
		t.Errorf("OnKubelet: %q; NodeOf: %s, %s", got, e.NodeOf("s", "standin fails"), e.NodeOf("s", "kubelet passes"))
	}
	standin := []Result{{Suite: "s", Spec: "standin fails", Outcome: Failed}, {Suite: "s", Spec: "other passes", Outcome: Passed}}
	if v := Compare(e, standin, true, StandIn); !v.OK() {
		t.Errorf("stand-in pass: %+v", v)
	}
	kubelet := []Result{{Suite: "s", Spec: "kubelet fails", Outcome: Failed}, {Suite: "s", Spec: "kubelet passes", Outcome: Passed}}
	v := Compare(e, kubelet, true, Kubelet)
	if !v.OK() || len(v.Passed) != 1 || len(v.AsExpected) != 1 {
		t.Errorf("kubelet pass: %+v", v)
	}
	var b strings.Builder
	v.Print(&b, e)
	if !strings.Contains(b.String(), "on kubelet nodes: 2 specs run: 1 passed") {
		t.Errorf("printed verdict does not name the pass:\n%s", b.String())
	}
	for _, missing := range []int{0, 1} {
		v := Compare(e, kubelet[1-missing:2-missing], true, Kubelet)
		if v.OK() || len(v.NotRun) != 1 || v.NotRun[0].Spec != kubelet[missing].Spec {
			t.Errorf("kubelet pass without %q: %+v", kubelet[missing].Spec, v)
		}
	}
}

// TestExpectationsValidate is the catalogue of list entries that are refused.
func TestExpectationsValidate(t *testing.T) {
	ok := Expectation{Suite: "s", Spec: "x", Outcome: Failed, Reason: "r", Detail: "d"}
	for name, c := range map[string]func(*Expectation){
		"no suite":       func(x *Expectation) { x.Suite = "" },
		"no spec":        func(x *Expectation) { x.Spec = "" },
		"outcome passed": func(x *Expectation) { x.Outcome = Passed },
		"no outcome":     func(x *Expectation) { x.Outcome = "" },
		"unknown reason": func(x *Expectation) { x.Reason = "other" },
		"no detail":      func(x *Expectation) { x.Detail = " " },
	} {
		x := ok
		c(&x)
		e := &Expectations{Reasons: map[string]string{"r": "why"}, Specs: []Expectation{x}}
		if e.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	e := &Expectations{Reasons: map[string]string{"r": "why"}, Specs: []Expectation{ok, ok}}
	if e.Validate() == nil {
		t.Error("a spec listed twice: accepted")
	}
	e = &Expectations{Reasons: map[string]string{"r": "why", "gone": "its last spec passes now"}, Specs: []Expectation{ok}}
	if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "reasons.gone") {
		t.Errorf("a reason no spec is listed with: %v, want an error naming reasons.gone", err)
	}

	// The kubelet list.
	k := KubeletSpec{Suite: "reclaim", Spec: "x", Needs: "exec"}
	for name, c := range map[string]func(*Expectations){
		"no suite":        func(e *Expectations) { e.Kubelet.Specs[0].Suite = "" },
		"no spec":         func(e *Expectations) { e.Kubelet.Specs[0].Spec = "" },
		"unknown need":    func(e *Expectations) { e.Kubelet.Specs[0].Needs = "other" },
		"listed twice":    func(e *Expectations) { e.Kubelet.Specs = append(e.Kubelet.Specs, k) },
		"need of no spec": func(e *Expectations) { e.Kubelet.Needs["gone"] = "its last spec runs on stand-ins now" },
		"excluded there": func(e *Expectations) {
			e.Specs = []Expectation{{Suite: "reclaim", Spec: "x", Outcome: Excluded, Reason: "r", Detail: "d"}}
		},
		"no need at all":  func(e *Expectations) { e.Kubelet.Specs[0].Needs = "" },
		"needs, no specs": func(e *Expectations) { e.Kubelet.Specs = nil },
	} {
		e := &Expectations{
			Reasons: map[string]string{"r": "why"},
			Specs:   []Expectation{ok},
			Kubelet: KubeletSpecs{Needs: map[string]string{"exec": "kubectl exec"}, Specs: []KubeletSpec{k}},
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("the valid list before %s: %v", name, err)
		}
		c(e)
		if e.Validate() == nil {
			t.Errorf("kubelet list, %s: accepted", name)
		}
	}
}

// TestCommittedList checks expected.yaml itself: it parses, every entry is valid and
// names one of the suites run.
func TestCommittedList(t *testing.T) {
	e, err := ReadExpectations("expected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range e.Specs {
		if !IsSuite(x.Suite) {
			t.Errorf("%q: suite %q is not one of %v", x.Spec, x.Suite, Suites)
		}
	}
	for _, k := range e.Kubelet.Specs {
		if !IsSuite(k.Suite) {
			t.Errorf("kubelet: %q: suite %q is not one of %v", k.Spec, k.Suite, Suites)
		}
	}
	if len(e.Kubelet.Specs) == 0 {
		t.Error("expected.yaml runs no spec on kubelet nodes: the specs that need kubectl exec or a container's exit code run there")
	}
}
