package manifests_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nicpool/nicpool/e2e/testenv"
)

var (
	flagRE     = regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?--?([a-zA-Z0-9][a-zA-Z0-9.-]*)`)
	flagsMu    sync.Mutex
	flagsCache = map[string][]string{}
)

// binaryFlags builds cmd/<name> and returns the flags its -h lists.
func binaryFlags(t *testing.T, name string) []string {
	t.Helper()
	flagsMu.Lock()
	defer flagsMu.Unlock()
	if f, ok := flagsCache[name]; ok {
		return f
	}
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/%s: %v\n%s", name, err, out)
	}
	// -h prints the flags and exits (with 0 or 2, depending on the flag library).
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	var flags []string
	for _, m := range flagRE.FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("cmd/%s -h lists no flags:\n%s", name, out)
	}
	flagsCache[name] = flags
	return flags
}

// Every argument the manifests pass to a nicpool binary is a flag that binary
// defines: a renamed flag breaks the test, not the rollout.
func TestContainerArgsAreFlagsOfTheBinaries(t *testing.T) {
	forEachKustomization(t, func(t *testing.T, objs []*unstructured.Unstructured) {
		var pods []corev1.PodSpec
		for _, o := range kinds(objs, "Deployment") {
			pods = append(pods, object[appsv1.Deployment](t, objs, "Deployment", o.GetName()).Spec.Template.Spec)
		}
		for _, o := range kinds(objs, "DaemonSet") {
			pods = append(pods, object[appsv1.DaemonSet](t, objs, "DaemonSet", o.GetName()).Spec.Template.Spec)
		}
		for _, pod := range pods {
			for _, c := range pod.Containers {
				name := strings.Split(filepath.Base(c.Image), ":")[0]
				if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), "cmd", name, "main.go")); err != nil {
					t.Errorf("container %s runs image %s, but there is no cmd/%s", c.Name, c.Image, name)
					continue
				}
				flags := binaryFlags(t, name)
				for _, a := range c.Args {
					f, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if !strings.HasPrefix(a, "-") || !slices.Contains(flags, f) {
						t.Errorf("container %s passes %q, not a flag of cmd/%s (%v)", c.Name, a, name, flags)
					}
				}
			}
		}
	})
}
