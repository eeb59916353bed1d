package docs_test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/crds"
	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
	"github.com/nicpool/nicpool/operate/cli"
)

var update = flag.Bool("update", false, "rewrite the generated sections of the pages instead of comparing them")

var root = testenv.RepoRoot()

func page(name string) string { return filepath.Join(root, name) }

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(page(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// userPages are what a user reads; CONTRIBUTING.md is for who clones the repository.
func userPages(t *testing.T) []string {
	t.Helper()
	pages, err := docs.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

func allPages(t *testing.T) []string {
	return append(userPages(t), page("CONTRIBUTING.md"))
}

func rel(p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// Every shell block says what runs it, and what it says holds: make targets exist,
// kustomizations are among those the manifests tests create on a real API server, the
// local cluster's commands are kubectl (e2e/suite runs them).
func TestEveryCommandIsRun(t *testing.T) {
	targets := makeTargets(t)
	kustomizations := map[string]bool{manifests.Monitoring: true}
	for _, k := range manifests.Kustomizations {
		kustomizations[filepath.Clean(k)] = true
	}
	values := chartValues(t)
	counts := map[docs.Run]int{}
	for _, p := range userPages(t) {
		blocks, err := docs.Blocks(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			where := fmt.Sprintf("%s:%d", rel(b.File), b.Line)
			if !slices.Contains(docs.Runs, b.Run) {
				t.Errorf("%s: the block has no <!-- run: NAME --> marker before it (one of %v), or an unknown one %q: say which test runs its commands", where, docs.Runs, b.Run)
				continue
			}
			if len(b.Commands) == 0 {
				t.Errorf("%s: the block has no command", where)
			}
			if (b.Run == docs.Situation) != (b.Situation != "") {
				t.Errorf("%s: a situation marker names its situation (<!-- run: situation NAME -->), and only it", where)
			}
			counts[b.Run] += len(b.Commands)
			for _, c := range b.Commands {
				f := strings.Fields(c.Line)
				switch b.Run {
				case docs.Make:
					if f[0] != "make" || len(f) < 2 {
						t.Errorf("%s: %q is not a make command", where, c.Line)
						continue
					}
					for _, a := range f[1:] {
						if !strings.Contains(a, "=") && !targets[a] {
							t.Errorf("%s: %q: the Makefile has no target %q", where, c.Line, a)
						}
					}
				case docs.Kustomize:
					if len(f) != 4 || f[0] != "kubectl" || f[1] != "apply" || f[2] != "-k" {
						t.Errorf("%s: %q: a kustomize block holds `kubectl apply -k manifests/...` only", where, c.Line)
						continue
					}
					dir, err := filepath.Rel("manifests", filepath.Clean(f[3]))
					if err != nil || !kustomizations[dir] {
						t.Errorf("%s: %q: %s is not a kustomization the manifests tests create (manifests.Kustomizations, manifests.Monitoring)", where, c.Line, f[3])
					}
				case docs.SpiderpoolMigration:
					if len(f) < 2 || f[0] != "kubectl" {
						t.Errorf("%s: %q: a spiderpool-migration block holds kubectl commands (`kubectl nicpool ...` among them), which operate/migrate/integration runs", where, c.Line)
					}
				case docs.SpiderpoolRelease:
					if len(f) < 3 || f[0] != "helm" || f[1] != "uninstall" || f[2] != "spiderpool" {
						t.Errorf("%s: %q: a spiderpool-release block holds `helm uninstall spiderpool [flags]`, which e2e/helm runs", where, c.Line)
					}
				case docs.LocalCluster:
					if f[0] != "kubectl" && f[0] != "export" {
						t.Errorf("%s: %q: the local cluster's blocks run kubectl (and export)", where, c.Line)
					}
				case docs.Situation:
					if f[0] != "kubectl" {
						t.Errorf("%s: %q: a situation's blocks run kubectl on the local cluster", where, c.Line)
					}
				case docs.Helm:
					// e2e/helm runs these with the Helm SDK on a real API server.
					// Every command names the release's namespace (-n NS); install may
					// create it and take over existing CRDs.
					if len(f) == 5 && f[0] == "helm" && (f[1] == "uninstall" || f[1] == "rollback") && f[2] == "nicpool" && f[3] == "-n" {
						continue
					}
					if len(f) < 6 || f[0] != "helm" || (f[1] != "install" && f[1] != "upgrade") || f[2] != "nicpool" || filepath.Clean(f[3]) != manifests.ChartDir || f[4] != "-n" {
						t.Errorf("%s: %q: a helm block holds `helm install|upgrade nicpool %s -n NAMESPACE [--create-namespace] [--take-ownership] [--set key=value]...`, `helm rollback nicpool -n NAMESPACE` or `helm uninstall nicpool -n NAMESPACE`, which e2e/helm runs", where, c.Line, manifests.ChartDir)
						continue
					}
					for i := 6; i < len(f); i += 2 {
						if f[1] == "install" && (f[i] == "--create-namespace" || f[i] == "--take-ownership") {
							i--
							continue
						}
						if f[i] != "--set" || i+1 == len(f) {
							t.Errorf("%s: %q: only --set key=value options (and install's --create-namespace and --take-ownership) are run by e2e/helm", where, c.Line)
							break
						}
						k, _, _ := strings.Cut(f[i+1], "=")
						if !values[k] {
							t.Errorf("%s: %q: the chart has no value %s", where, c.Line, k)
						}
					}
				}
			}
		}
	}
	// The walkthrough is what e2e/suite runs: it must not vanish unnoticed.
	if counts[docs.LocalCluster] == 0 {
		t.Errorf("no page has a local-cluster block: the README walkthrough lost its marker")
	}
}

// chartValues are the dotted paths of the chart's values, leaves included.
func chartValues(t *testing.T) map[string]bool {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(manifests.ChartDir, "values.yaml"))), &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, x := range m {
			out[prefix+k] = true
			if sub, ok := x.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", v)
	return out
}

// Every name .PHONY declares is a target of the Makefile, so that the list says which
// targets make runs whatever files exist, and no more.
func TestPhonyNamesTargets(t *testing.T) {
	data, err := os.ReadFile(page("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := makeTargets(t)
	phony := 0
	for _, line := range strings.Split(string(data), "\n") {
		names, ok := strings.CutPrefix(line, ".PHONY:")
		if !ok {
			continue
		}
		for _, name := range strings.Fields(names) {
			phony++
			if !targets[name] {
				t.Errorf(".PHONY names %q, which the Makefile does not define", name)
			}
		}
	}
	if phony == 0 {
		t.Error("the Makefile declares no .PHONY target")
	}
}

func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(page("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	targets := map[string]bool{}
	re := regexp.MustCompile(`^([a-z][a-z0-9-]*):`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			targets[m[1]] = true
		}
	}
	return targets
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
)

// anchors are the ids a Markdown renderer (GitHub's) gives the headings of a page.
func anchors(t *testing.T, p string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
		}
		if fence {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			var id strings.Builder
			for _, r := range strings.ToLower(m[1]) {
				switch {
				case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
					id.WriteRune(r)
				case r == ' ':
					id.WriteRune('-')
				}
			}
			out[id.String()] = true
		}
	}
	return out
}

// Every relative link leads to a file of the repository, and to a heading of it when
// it names one.
func TestLinksResolve(t *testing.T) {
	for _, p := range allPages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Join(filepath.Dir(p), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %q: %v", rel(p), target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchors(t, dest)[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", rel(p), target, rel(dest), anchor)
			}
		}
	}
}

// The pages speak to a user on their own machine: no path of a development machine,
// no remark to the team.
// machinePath is a path of a development machine.
var machinePath = regexp.MustCompile(`(^|[\s("'=\x60])/(work|home|Users|root)/`)

func TestPagesSpeakToUsers(t *testing.T) {
	for _, p := range allPages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if machinePath.MatchString(line) {
				t.Errorf("%s:%d: a path of a development machine: %s", rel(p), i+1, line)
			}
		}
	}
	team := regexp.MustCompile(`(?i)\bengineers?\b|several of us|\bhere\b|\bthis machine\b`)
	for _, p := range userPages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := team.FindString(line); m != "" {
				t.Errorf("%s:%d: %q speaks to the team or points nowhere: %s", rel(p), i+1, m, line)
			}
		}
	}
	readme := read(t, "README.md")
	if first, _, _ := strings.Cut(readme, "\n"); first != "# nicpool" {
		t.Errorf("README.md starts with %q, want the title", first)
	}
}

// The flag tables of docs/configuration.md are the binaries' own -help, so they
// cannot drift; go test ./docs -update rewrites them.
func TestFlagReference(t *testing.T) {
	set, err := binaries.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const name = "docs/configuration.md"
	text := read(t, name)
	for _, c := range []struct {
		section string
		args    []string
	}{
		{"nicpool-webhook", []string{set.Webhook, "-h"}},
		{"nicpool-ipamd", []string{set.Ipamd, "-h"}},
		// The init container's copy step; its usage exits 2, as a usage error does.
		{"nicpool-cni install", []string{set.GoPlugin, "install", "-h"}},
	} {
		cmd := exec.Command(c.args[0], c.args[1:]...)
		// The defaults of some flags come from the pod's environment.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || c.section != "nicpool-cni install") {
			t.Fatalf("%v: %v\n%s", c.args, err, out)
		}
		table := flagTable(t, string(out))
		text = replaceSection(t, text, "flags: "+c.section, table)
	}
	compareOrUpdate(t, name, text)
}

// The flag table of docs/kubectl-nicpool.md is the plugin's own flag set, so it cannot
// drift; go test ./docs -update rewrites it.
func TestPluginFlagReference(t *testing.T) {
	const name = "docs/kubectl-nicpool.md"
	root := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	cell := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		flagName := "--" + f.Name
		if f.Shorthand != "" {
			flagName = "-" + f.Shorthand + ", " + flagName
		}
		if f.Value.Type() != "bool" {
			flagName += " " + f.Value.Type()
		}
		d := ""
		if f.DefValue != "" && f.DefValue != "[]" && f.DefValue != "false" {
			d = "`" + f.DefValue + "`"
		}
		if machinePath.MatchString(" " + f.DefValue) {
			t.Errorf("kubectl nicpool --%s: its default %q is a path of this machine: show one that holds on any", f.Name, f.DefValue)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", flagName, d, cell(f.Usage))
	})
	compareOrUpdate(t, name, replaceSection(t, read(t, name), "flags: kubectl nicpool", b.String()))
}

// flagTable renders Go's flag usage as a Markdown table.
func flagTable(t *testing.T, usage string) string {
	t.Helper()
	type flagDoc struct{ name, kind, text string }
	var flags []flagDoc
	head := regexp.MustCompile(`^  -(\S+)(?:\s+(\S+))?$`)
	for _, line := range strings.Split(usage, "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			flags = append(flags, flagDoc{name: m[1], kind: m[2]})
			continue
		}
		if len(flags) > 0 && strings.HasPrefix(line, "    \t") {
			f := &flags[len(flags)-1]
			f.text = strings.TrimSpace(f.text + " " + strings.TrimSpace(line))
		}
	}
	if len(flags) == 0 {
		t.Fatalf("no flag in the usage:\n%s", usage)
	}
	def := regexp.MustCompile(` \(default (.*)\)$`)
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	for _, f := range flags {
		text, dflt := f.text, ""
		if m := def.FindStringSubmatchIndex(text); m != nil {
			dflt, text = text[m[2]:m[3]], text[:m[0]]
		}
		flagName := "--" + f.name
		if f.kind != "" {
			flagName += " " + f.kind
		}
		cell := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace
		d := ""
		if dflt != "" {
			d = "`" + strings.Trim(dflt, `"`) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", flagName, d, cell(text))
	}
	return b.String()
}

// replaceSection puts body between <!-- begin NAME --> and <!-- end NAME -->.
func replaceSection(t *testing.T, text, name, body string) string {
	t.Helper()
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
	i := strings.Index(text, begin)
	j := strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("the page has no section %q...%q", begin, end)
	}
	return text[:i+len(begin)] + body + text[j:]
}

func compareOrUpdate(t *testing.T, name, want string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(page(name), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := read(t, name); got != want {
		t.Errorf("%s is stale: run go test ./docs -run %s -update", name, t.Name())
	}
}

// backticked are the words of a page written as code.
func backticked(t *testing.T, name string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	// Inline code only: a fence's backticks would pair with the text's.
	var prose strings.Builder
	fence := false
	for _, line := range strings.Split(read(t, name), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if !fence {
			prose.WriteString(line + "\n")
		}
	}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(prose.String(), -1) {
		out[m[1]] = true
	}
	return out
}

// goStrings are the string literals of the non-test Go files under dirs that match re.
func goStrings(t *testing.T, re *regexp.Regexp, dirs ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	lit := regexp.MustCompile(`"([^"\\]*)"`)
	for _, d := range dirs {
		err := filepath.WalkDir(page(d), func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
				if re.MatchString(m[1]) {
					seen[m[1]] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Every annotation nicpool reads or writes is in the configuration reference.
func TestAnnotationReference(t *testing.T) {
	keys := goStrings(t, regexp.MustCompile(`^[a-z0-9.-]+\.(io|com)/[a-z0-9-]+$`), "crds/annotations")
	if len(keys) < 5 {
		t.Fatalf("found only %v in crds/annotations", keys)
	}
	documented := backticked(t, "docs/configuration.md")
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("docs/configuration.md does not describe the annotation `%s`", k)
		}
	}
}

// Every field of a pool's and a reserved IP's spec is in the configuration reference.
func TestPoolFieldReference(t *testing.T) {
	defs, err := crds.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	documented := backticked(t, "docs/configuration.md")
	n := 0
	for _, d := range defs {
		if d.Spec.Names.Kind != "SpiderIPPool" && d.Spec.Names.Kind != "SpiderReservedIP" {
			continue
		}
		for _, v := range d.Spec.Versions {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			for field := range spec.Properties {
				n++
				if !documented[field] {
					t.Errorf("docs/configuration.md does not describe %s's spec.%s", d.Spec.Names.Kind, field)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no spec field found in the CRDs")
	}
}

// Every key of the CNI ipam section the plugin reads is in the plugin's page.
func TestCNIKeyReference(t *testing.T) {
	keys := goStrings(t, regexp.MustCompile(`^[a-z]+(_[a-z0-9]+)+$`), "cniplugin")
	if !slices.Contains(keys, "default_ipv4_ippool") {
		t.Fatalf("the plugin's keys were not found: %v", keys)
	}
	documented := backticked(t, "docs/cni-plugin.md")
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("docs/cni-plugin.md does not describe the ipam key `%s`", k)
		}
	}
}

// Every metric, alert, Event reason and garbage-collection reason is in the metrics
// page, and the page names no metric that does not exist.
func TestMetricsReference(t *testing.T) {
	const name = "docs/metrics.md"
	documented := backticked(t, name)
	metrics := goStrings(t, regexp.MustCompile(`^nicpool_[a-z_]+$`), "ipamd", "webhook", "certs", "cniplugin", "version")
	if len(metrics) < 10 {
		t.Fatalf("found only %v", metrics)
	}
	for _, m := range metrics {
		if !documented[m] {
			t.Errorf("%s does not describe the metric `%s`", name, m)
		}
	}
	for d := range documented {
		if strings.HasPrefix(d, "nicpool_") && !slices.Contains(metrics, d) {
			t.Errorf("%s names `%s`, which no binary exports", name, d)
		}
	}
	rules := read(t, "manifests/overlays/monitoring/prometheusrule.yaml")
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`).FindAllStringSubmatch(rules, -1)
	if len(alerts) == 0 {
		t.Fatal("no alert in the PrometheusRule")
	}
	for _, a := range alerts {
		if !documented[a[1]] {
			t.Errorf("%s does not describe the alert `%s`", name, a[1])
		}
	}
	events := eventReasons(t)
	for _, r := range events {
		if !documented[r] {
			t.Errorf("%s does not describe the Event reason `%s`", name, r)
		}
	}
	gc := regexp.MustCompile(`Reason[A-Za-z]* Reason = "([a-z-]+)"`).FindAllStringSubmatch(read(t, "webhook/controller/gc/decide.go"), -1)
	if len(gc) == 0 {
		t.Fatal("no garbage-collection reason in webhook/controller/gc/decide.go")
	}
	for _, r := range gc {
		if !documented[r[1]] {
			t.Errorf("%s does not describe the garbage-collection reason `%s`", name, r[1])
		}
	}
}

// eventReasons are the reasons of the Events ipamd records on pods and the pool
// counter on pools.
func eventReasons(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`s\.event\([a-z]+, "([A-Za-z]+)"`)
	var out []string
	files, err := filepath.Glob(page("ipamd/service/*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Event reason found in ipamd/service")
	}
	// The pool counter's, on pools.
	counter := regexp.MustCompile(`Event[A-Za-z]+ = "([A-Za-z]+)"`).FindAllStringSubmatch(read(t, "webhook/controller/poolcount/poolcount.go"), -1)
	if len(counter) == 0 {
		t.Fatal("no Event reason found in webhook/controller/poolcount")
	}
	for _, m := range counter {
		out = append(out, m[1])
	}
	return out
}

// notRun is how a page says plainly that a command it shows is not run by a test.
var notRun = regexp.MustCompile(`nicpool's tests do not run`)

// notRunBecause are inline commands of pages whose own words say why no test can run
// them (a release nicpool does not publish).
var notRunBecause = map[string]string{
	"kubectl krew install --manifest=kubectl-nicpool.krew.yaml": "the page says nicpool is not published in krew's index",
}

// imageTools are the commands of container runtimes and registries a page may name for
// loading nicpool's images; no block runs them.
var imageTools = map[string]bool{"ctr": true, "crictl": true, "kind": true, "docker": true, "skopeo": true, "podman": true, "nerdctl": true}

// ranElsewhere are inline commands that a test outside the pages' blocks runs: the
// file of the repository that runs it, and its arguments as that file writes them.
var ranElsewhere = map[string]struct{ file, args string }{
	// e2e/kubelet.Import, on every real node of `make test-real`.
	"ctr -n k8s.io images import": {"e2e/kubelet/node.go", `"--namespace", "k8s.io", "images", "import"`},
}

// optional are the [bracketed] optional parts of a command's synopsis.
var optional = regexp.MustCompile(`\[[^\]]*\]`)

// Commands written inline are run too. An inline kubectl or helm command is a block's
// command (written in the same order; NAME, ADDRESS, <node> and the like stand for a
// word the block fills in, and ... for the rest), or its paragraph says that nicpool's
// tests do not run it, or it is a `kubectl nicpool` subcommand that operate/cli's
// tests run; an inline command of a container runtime or registry tool is one a test
// runs (ranElsewhere), or its paragraph says no test runs it; an inline make command
// names targets of the Makefile, and an inline go test packages of the repository.
// The "$ command" lines of a transcript (a text block of commands and what they print)
// are kubectl or helm commands run as inline ones are.
func TestInlineCommandsAreRun(t *testing.T) {
	var run [][]string
	for _, p := range userPages(t) {
		blocks, err := docs.Blocks(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			for _, c := range b.Commands {
				run = append(run, strings.Fields(c.Line))
			}
		}
	}
	targets := makeTargets(t)
	pluginTested := map[string]bool{}
	tests, err := filepath.Glob(page("operate/cli/*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`kubectl\(t, "([a-z-]+)"`).FindAllStringSubmatch(string(b), -1) {
			pluginTested[m[1]] = true
		}
	}
	// ranByTest says whether a kubectl or helm command is run by a test: it is a block's
	// command, or a `kubectl nicpool` subcommand that operate/cli's tests run on a real
	// API server.
	ranByTest := func(f []string) bool {
		if len(f) > 2 && f[0] == "kubectl" && f[1] == "nicpool" && pluginTested[f[2]] {
			return true
		}
		return slices.ContainsFunc(run, func(b []string) bool { return covers(b, f) })
	}
	user := map[string]bool{}
	for _, p := range userPages(t) {
		user[p] = true
	}
	n := 0
	for _, p := range allPages(t) {
		for _, para := range paragraphs(t, p) {
			for _, m := range inlineCode.FindAllStringSubmatch(para, -1) {
				f := strings.Fields(optional.ReplaceAllString(m[1], ""))
				if len(f) < 2 {
					continue
				}
				switch {
				case f[0] == "make":
					n++
					for _, a := range f[1:] {
						if !strings.Contains(a, "=") && !targets[a] {
							t.Errorf("%s: `%s`: the Makefile has no target %q", rel(p), m[1], a)
						}
					}
				case f[0] == "go" && f[1] == "test":
					n++
					for _, a := range f[2:] {
						if strings.HasPrefix(a, "./") {
							if _, err := os.Stat(page(strings.TrimSuffix(a, "/..."))); err != nil {
								t.Errorf("%s: `%s`: %v", rel(p), m[1], err)
							}
						}
					}
				case imageTools[f[0]] && user[p]:
					n++
					if notRun.MatchString(para) {
						continue
					}
					line := strings.Join(f, " ")
					ran := false
					for prefix, by := range ranElsewhere {
						if line == prefix || strings.HasPrefix(line, prefix+" ") {
							ran = true
							if !strings.Contains(read(t, by.file), by.args) {
								t.Errorf("%s: `%s` is said to be run by %s, which no longer runs %s", rel(p), m[1], by.file, by.args)
							}
						}
					}
					if !ran {
						t.Errorf("%s: `%s` is run by no test: say beside it that nicpool's tests do not run it, and why", rel(p), m[1])
					}
				case (f[0] == "kubectl" || f[0] == "helm") && user[p]:
					n++
					if notRun.MatchString(para) || notRunBecause[strings.Join(f, " ")] != "" {
						continue
					}
					if !ranByTest(f) {
						t.Errorf("%s: `%s` is run by no test: show it in a block with a <!-- run: NAME --> marker (inline, write it as that block does), or say beside it that nicpool's tests do not run it, and why", rel(p), m[1])
					}
				}
			}
		}
	}
	// A transcript, a block of another language showing "$ command" and what it
	// prints, holds commands a user types too.
	transcribed := 0
	for _, p := range userPages(t) {
		for _, c := range transcripts(t, p) {
			transcribed++
			f := strings.Fields(c.Line)
			if len(f) < 2 || f[0] != "kubectl" && f[0] != "helm" || !ranByTest(f) {
				t.Errorf("%s: `%s` is run by no test: a transcript shows kubectl or helm commands that a block with a <!-- run: NAME --> marker runs, or `kubectl nicpool` subcommands that operate/cli's tests run", c.Where, c.Line)
			}
		}
	}
	if n == 0 || transcribed == 0 {
		t.Fatalf("%d inline commands and %d transcript commands found: the pages lost them, or this test no longer finds them", n, transcribed)
	}
}

// transcripts are the commands that blocks of languages other than a shell's show as
// "$ command" lines, each with its page and line.
func transcripts(t *testing.T, p string) []docs.Command {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out   []docs.Command
		fence bool
		shell bool
	)
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
			fence = !fence
			shell = fence && docs.ShellLang(lang)
			continue
		}
		if cmd, ok := strings.CutPrefix(line, "$ "); ok && fence && !shell {
			out = append(out, docs.Command{Line: cmd, Where: fmt.Sprintf("%s:%d", rel(p), i+1)})
		}
	}
	return out
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// placeholder stands for a word a command fills in: NAME, NAMESPACE, <node>.
var placeholder = regexp.MustCompile(`^(?:[A-Z][A-Z_]*|<[^>]+>)$`)

// fills says whether a block's word stands where an inline command has w: the same
// word, or any word but a flag for a placeholder.
func fills(word, w string) bool {
	return word == w || placeholder.MatchString(w) && !strings.HasPrefix(word, "-")
}

// covers says whether the words of an inline command are those of a block's command,
// in order, with placeholders and a final ... standing for words of the block.
func covers(block, inline []string) bool {
	j := 0
	for _, w := range inline {
		if w == "..." {
			return true
		}
		for j < len(block) && !fills(block[j], w) {
			j++
		}
		if j == len(block) {
			return false
		}
		j++
	}
	return true
}

// paragraphs are the paragraphs and list items of a page, outside fenced blocks, each
// on one line.
func paragraphs(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out   []string
		cur   []string
		fence bool
	)
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fence = !fence
			flush()
			continue
		}
		if fence {
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "|") || strings.HasPrefix(trimmed, "#") {
			flush()
		}
		if trimmed != "" {
			cur = append(cur, trimmed)
		}
	}
	flush()
	return out
}
