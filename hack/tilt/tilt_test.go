package tilt_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/hack/images"
	"github.com/nicpool/nicpool/hack/tilt"
	"github.com/nicpool/nicpool/manifests"
)

var root = testenv.RepoRoot()

// kustomize renders like Tilt's kustomize(): one YAML stream.
func kustomize(dir string) (string, error) {
	objs, err := manifests.Render(filepath.Join(root, dir))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return "", err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String(), nil
}

func evaluate(t *testing.T, args map[string]string) *tilt.Result {
	t.Helper()
	r, err := tilt.Evaluate(tilt.Options{Root: root, Args: args, Kustomize: kustomize, K8sContext: "envtest"})
	if err != nil {
		t.Fatalf("Tiltfile with %v: %v", args, err)
	}
	return r
}

func exists(t *testing.T, what, path string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, path)); err != nil {
		t.Errorf("%s %q does not exist in the repository", what, path)
	}
}

var targetRE = regexp.MustCompile(`^([a-z][a-z0-9-]*):`)

// makeTargets are the targets the Makefile defines.
func makeTargets(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := targetRE.FindStringSubmatch(s.Text()); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// The default mode needs neither Docker nor a cluster: every command is a make
// target (the project's interface), and a change to any package the binaries are
// built from rebuilds and restarts the local cluster.
func TestLocalModeRunsTheMakefile(t *testing.T) {
	for _, args := range []map[string]string{nil, {"mode": "local"}} {
		r := evaluate(t, args)
		if len(r.Images) > 0 || len(r.CustomBuilds) > 0 || len(r.YAML) > 0 || len(r.K8sResources) > 0 {
			t.Errorf("mode local builds images or applies YAML: %d images, %d YAML, %d resources", len(r.Images), len(r.YAML), len(r.K8sResources))
		}
		targets := makeTargets(t)
		names := map[string]bool{}
		var serving *tilt.LocalResource
		for i, lr := range r.LocalResources {
			names[lr.Name] = true
			for _, cmd := range []string{lr.Cmd, lr.ServeCmd} {
				if cmd == "" {
					continue
				}
				target, ok := strings.CutPrefix(cmd, "make ")
				if !ok || strings.Contains(target, " ") || !slices.Contains(targets, target) {
					t.Errorf("local_resource %s runs %q: want `make <target>` with a target of the Makefile (%v)", lr.Name, cmd, targets)
				}
			}
			for _, d := range lr.Deps {
				exists(t, "dep of "+lr.Name, d)
			}
			if lr.ServeCmd != "" {
				serving = &r.LocalResources[i]
			}
		}
		for _, lr := range r.LocalResources {
			for _, d := range lr.ResourceDeps {
				if !names[d] {
					t.Errorf("local_resource %s depends on unknown resource %s", lr.Name, d)
				}
			}
		}
		if serving == nil {
			t.Fatal("no local_resource serves the local cluster")
		}
		if serving.ServeCmd != "make run" || serving.Cmd != "make build" {
			t.Errorf("the local cluster should be built by `make build` and served by `make run`, got cmd %q serve_cmd %q", serving.Cmd, serving.ServeCmd)
		}
		if len(serving.ReadinessExec) == 0 {
			t.Error("the local cluster has no readiness probe")
		}
		// Every folder holding a package that a binary is built from is a dep or
		// under one (Tilt watches a folder's whole tree), or a change to it would not
		// restart the cluster.
		for _, dir := range sourceFolders(t) {
			if !slices.ContainsFunc(serving.Deps, func(d string) bool { return dir == d || strings.HasPrefix(dir, d+"/") }) {
				t.Errorf("%s: a change in %s/ does not rebuild and restart the local cluster", serving.Name, dir)
			}
		}
		for _, f := range []string{"go.mod", "go.sum"} {
			if !slices.Contains(serving.Deps, f) {
				t.Errorf("%s does not watch %s", serving.Name, f)
			}
		}
	}
}

// sourceFolders are the repository's folders that hold a package a binary of cmd/ is
// built from, relative to its root.
func sourceFolders(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/...: %v", err)
	}
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.ToSlash(rel))
	}
	if !slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(d, "cmd/") }) {
		t.Fatalf("go list found no binaries: %v", dirs)
	}
	return dirs
}

// applied decodes what an evaluation passes to k8s_yaml, checking that it comes from
// one of the repository's kustomizations.
func applied(t *testing.T, r *tilt.Result, want string) []*unstructured.Unstructured {
	t.Helper()
	if len(r.Kustomizations) != 1 || filepath.Clean(r.Kustomizations[0]) != want {
		t.Fatalf("applies %v; want %s", r.Kustomizations, want)
	}
	if !slices.ContainsFunc(manifests.Kustomizations, func(k string) bool {
		return filepath.Join(manifests.Dir, k) == want
	}) {
		t.Fatalf("%s is not one of the tested kustomizations %v", want, manifests.Kustomizations)
	}
	var objs []*unstructured.Unstructured
	for _, blob := range r.YAML {
		for _, doc := range strings.Split(blob, "\n---\n") {
			u := &unstructured.Unstructured{}
			if strings.TrimSpace(strings.TrimPrefix(doc, "---\n")) == "" {
				continue
			}
			j, err := yaml.YAMLToJSON([]byte(strings.TrimPrefix(doc, "---\n")))
			if err != nil {
				t.Fatal(err)
			}
			if err := u.UnmarshalJSON(j); err != nil {
				t.Fatal(err)
			}
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 {
		t.Fatal("applies no objects")
	}
	return objs
}

// workloadImages are the images (without tags) the Deployments and DaemonSets run,
// and the workloads by name.
func workloadImages(objs []*unstructured.Unstructured) (map[string]bool, map[string]*unstructured.Unstructured) {
	used := map[string]bool{}
	workloads := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		workloads[o.GetName()] = o
		for _, field := range []string{"initContainers", "containers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				image := c.(map[string]any)["image"].(string)
				used[strings.Split(image, ":")[0]] = true
			}
		}
	}
	return used, workloads
}

// checkImages: every image of a workload is built, every build is used.
func checkImages(t *testing.T, used map[string]bool, built []string) {
	t.Helper()
	for _, ref := range built {
		if !used[ref] {
			t.Errorf("image %s is built but no workload uses it", ref)
		}
	}
	for ref := range used {
		if !slices.Contains(built, ref) {
			t.Errorf("workload image %s is not built", ref)
		}
	}
}

// checkResources: workloads and object selectors exist, every object has a resource,
// every dependency is a resource, the metrics of both components are forwarded.
func checkResources(t *testing.T, r *tilt.Result, objs []*unstructured.Unstructured, workloads map[string]*unstructured.Unstructured) {
	t.Helper()
	names := map[string]bool{}
	for _, lr := range r.LocalResources {
		names[lr.Name] = true
	}
	claimed := map[*unstructured.Unstructured]bool{}
	for _, res := range r.K8sResources {
		names[res.Name()] = true
		if res.Workload != "" {
			w, ok := workloads[res.Workload]
			if !ok {
				t.Errorf("k8s_resource %s: no such workload", res.Workload)
				continue
			}
			claimed[w] = true
			for _, pf := range res.PortForwards {
				_, port, _ := strings.Cut(pf, ":")
				if !containerPort(w, port) {
					t.Errorf("k8s_resource %s forwards %s: not a container port", res.Workload, pf)
				}
			}
		}
		for _, sel := range res.Objects {
			name, kind, _ := strings.Cut(sel, ":")
			found := false
			for _, o := range objs {
				if o.GetName() == name && strings.EqualFold(o.GetKind(), kind) {
					found, claimed[o] = true, true
				}
			}
			if !found {
				t.Errorf("k8s_resource %s: object %s is not rendered", res.Name(), sel)
			}
		}
	}
	for _, res := range r.K8sResources {
		for _, d := range res.ResourceDeps {
			if !names[d] {
				t.Errorf("k8s_resource %s depends on unknown resource %s", res.Name(), d)
			}
		}
	}
	for _, o := range objs {
		// Tilt puts a Service with the workload it selects; anything else unclaimed
		// would land in "uncategorized".
		if !claimed[o] && o.GetKind() != "Service" {
			t.Errorf("%s %s belongs to no Tilt resource", o.GetKind(), o.GetName())
		}
	}
	for _, w := range []string{"nicpool-webhook", "nicpool-ipamd"} {
		if !slices.ContainsFunc(r.K8sResources, func(res tilt.K8sResource) bool { return res.Workload == w && len(res.PortForwards) > 0 }) {
			t.Errorf("the metrics of %s are not port-forwarded", w)
		}
	}
}

// Mode kind builds every image the manifests use from an existing Dockerfile,
// applies an overlay that renders, installs the cert-manager release the overlay
// is tested against before anything needs it, and forwards each component's
// metrics port.
func TestKindModeBuildsImagesAndAppliesTheOverlay(t *testing.T) {
	r := evaluate(t, map[string]string{"mode": "kind"})
	for _, lr := range r.LocalResources {
		for _, d := range lr.Deps {
			exists(t, "dep of "+lr.Name, d)
		}
	}
	for _, f := range r.WatchedFiles {
		exists(t, "watched file", f)
	}
	objs := applied(t, r, filepath.Join(manifests.Dir, "overlays", "cert-manager"))
	used, workloads := workloadImages(objs)
	var built []string
	for _, img := range r.Images {
		built = append(built, img.Ref)
		exists(t, "build context of "+img.Ref, img.Context)
		exists(t, "Dockerfile of "+img.Ref, img.Dockerfile)
		exists(t, "ignore file of "+img.Ref, img.Dockerfile+".dockerignore")
		for _, ig := range []string{"bin", ".local"} {
			if !slices.Contains(img.Ignore, ig) {
				t.Errorf("image %s sends %s/ to the builder", img.Ref, ig)
			}
		}
		// The Dockerfile builds the binary the image is named after.
		df, err := os.ReadFile(filepath.Join(root, img.Dockerfile))
		if err != nil {
			continue
		}
		im, err := images.Lookup(filepath.Base(img.Ref))
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(df), "./cmd/"+im.Binary+"\n") {
			t.Errorf("%s does not build ./cmd/%s", img.Dockerfile, im.Binary)
		}
		exists(t, "command of "+img.Ref, filepath.Join("cmd", im.Binary))
	}
	checkImages(t, used, built)
	checkResources(t, r, objs, workloads)

	// cert-manager: the tested release, installed and waited for before the
	// certificates are applied.
	var cm *tilt.LocalResource
	for i, lr := range r.LocalResources {
		if lr.Name == "cert-manager" {
			cm = &r.LocalResources[i]
		}
	}
	if cm == nil {
		t.Fatal("kind mode does not install cert-manager")
	}
	if !strings.Contains(cm.Cmd, "/"+manifests.CertManagerVersion+"/") || !strings.Contains(cm.Cmd, "kubectl -n cert-manager wait") {
		t.Errorf("cert-manager resource should install %s and wait for it: %q", manifests.CertManagerVersion, cm.Cmd)
	}
	for _, res := range r.K8sResources {
		if slices.ContainsFunc(res.Objects, func(s string) bool { return strings.HasSuffix(s, ":certificate") || strings.HasSuffix(s, ":issuer") }) &&
			!slices.Contains(res.ResourceDeps, "cert-manager") {
			t.Errorf("k8s_resource %s applies cert-manager objects before cert-manager is ready", res.Name())
		}
	}
}

var importRE = regexp.MustCompile(`^make (image-import) IMAGE=([a-z0-9-]+) IMAGE_REF=\$EXPECTED_REF$`)

// Mode kubelet needs no Docker: each image of the workloads is built by hack/images
// through a make target and imported into the nodes (never pushed), rebuilt when a
// package its binary is built from or the image builder changes; it applies the overlay the real nodes
// run (self-managed certificates, no cert-manager), only to the cluster of `make up
// NODE=kubelet`.
func TestKubeletModeBuildsImagesWithoutDocker(t *testing.T) {
	r := evaluate(t, map[string]string{"mode": "kubelet"})
	if len(r.Images) > 0 {
		t.Errorf("mode kubelet builds %d images with Docker", len(r.Images))
	}
	if !slices.Equal(r.AllowedContexts, []string{"envtest"}) {
		t.Errorf("mode kubelet allows contexts %v; want only envtest, the context of .local/kubeconfig", r.AllowedContexts)
	}
	for _, f := range r.WatchedFiles {
		exists(t, "watched file", f)
	}
	objs := applied(t, r, filepath.Join(manifests.Dir, "overlays", "self-managed"))
	used, workloads := workloadImages(objs)
	targets := makeTargets(t)
	var built []string
	for _, cb := range r.CustomBuilds {
		built = append(built, cb.Ref)
		m := importRE.FindStringSubmatch(cb.Command)
		if m == nil {
			t.Errorf("custom_build %s runs %q; want make image-import IMAGE=<name> IMAGE_REF=$EXPECTED_REF", cb.Ref, cb.Command)
			continue
		}
		if !slices.Contains(targets, m[1]) {
			t.Errorf("custom_build %s: the Makefile has no target %s", cb.Ref, m[1])
		}
		im, err := images.Lookup(m[2])
		if err != nil {
			t.Errorf("custom_build %s: %v", cb.Ref, err)
			continue
		}
		if filepath.Base(cb.Ref) != im.Name {
			t.Errorf("custom_build %s builds image %s", cb.Ref, im.Name)
		}
		if !cb.SkipsLocalDocker || !cb.DisablePush {
			t.Errorf("custom_build %s: want skips_local_docker and disable_push (no Docker, no registry)", cb.Ref)
		}
		for _, d := range cb.Deps {
			exists(t, "dep of "+cb.Ref, d)
		}
		for _, dir := range imports(t, "./cmd/"+im.Binary) {
			if !slices.ContainsFunc(cb.Deps, func(d string) bool { return dir == d || strings.HasPrefix(dir, d+"/") }) {
				t.Errorf("custom_build %s: a change in %s/ does not rebuild the image", cb.Ref, dir)
			}
		}
		for _, f := range []string{"go.mod", "go.sum", "hack/images"} {
			if !slices.Contains(cb.Deps, f) {
				t.Errorf("custom_build %s does not watch %s", cb.Ref, f)
			}
		}
		// The C front is built from its own folder, which no Go package imports.
		if slices.Contains(im.Beside, "nicpool") && !slices.ContainsFunc(cb.Deps, func(d string) bool { return d == "cniplugin/front" || strings.HasPrefix("cniplugin/front", d+"/") }) {
			t.Errorf("custom_build %s: a change in cniplugin/front/ does not rebuild the image", cb.Ref)
		}
	}
	checkImages(t, used, built)
	checkResources(t, r, objs, workloads)
	for _, lr := range r.LocalResources {
		if strings.Contains(lr.Cmd, "cert-manager") {
			t.Errorf("mode kubelet installs cert-manager (%s); the self-managed overlay needs none", lr.Name)
		}
	}

	// Elsewhere it refuses to start, naming what to run.
	_, err := tilt.Evaluate(tilt.Options{Root: root, Args: map[string]string{"mode": "kubelet"}, Kustomize: kustomize, K8sContext: "prod"})
	if err == nil || !strings.Contains(err.Error(), "make up NODE=kubelet") {
		t.Errorf("mode kubelet on context prod: want an error naming `make up NODE=kubelet`, got %v", err)
	}
}

// imports are the repository folders (cmd/<binary> and the top-level folders of the
// other packages) a binary is built from.
func imports(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		dir := parts[0]
		if dir == "cmd" && len(parts) > 1 {
			dir = "cmd/" + parts[1]
		}
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

func containerPort(w *unstructured.Unstructured, port string) bool {
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return false
	}
	cs, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
		for _, p := range ports {
			if cp, _, _ := unstructured.NestedInt64(p.(map[string]any), "containerPort"); cp == n {
				return true
			}
		}
	}
	return false
}

// A mistyped mode fails the Tiltfile instead of starting nothing.
func TestUnknownModeFails(t *testing.T) {
	if _, err := tilt.Evaluate(tilt.Options{Root: root, Args: map[string]string{"mode": "minikube"}, Kustomize: kustomize}); err == nil ||
		!strings.Contains(err.Error(), "unknown mode") {
		t.Errorf("mode minikube: want an error naming the modes, got %v", err)
	}
}
