package memory

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
)

var (
	deployedOnce sync.Once
	deployed     map[string][]string
	deployedErr  error
)

// deployedRuntimeEnv is the Go runtime settings (GOMEMLIMIT, GOGC, ...) that
// manifests/base gives the container, as NAME=value: the binaries are measured as
// they are deployed.
func deployedRuntimeEnv(tb testing.TB, container string) []string {
	tb.Helper()
	deployedOnce.Do(func() {
		objs, err := manifests.Render(filepath.Join(testenv.RepoRoot(), manifests.Dir))
		if err != nil {
			deployedErr = err
			return
		}
		deployed = map[string][]string{}
		for _, o := range objs {
			if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c, _ := c.(map[string]any)
				name, _ := c["name"].(string)
				env, _, _ := unstructured.NestedSlice(c, "env")
				for _, e := range env {
					e, _ := e.(map[string]any)
					n, _ := e["name"].(string)
					v, literal := e["value"].(string)
					if literal && strings.HasPrefix(n, "GO") {
						deployed[name] = append(deployed[name], n+"="+v)
					}
				}
			}
		}
	})
	if deployedErr != nil {
		tb.Fatalf("render manifests/base for the containers' Go runtime settings: %v", deployedErr)
	}
	return slices.Clone(deployed[container])
}

// describeEnv renders a process's extra environment for the benchmark's log.
func describeEnv(env []string) string {
	if len(env) == 0 {
		return "no Go runtime settings"
	}
	return fmt.Sprintf("%s as deployed", strings.Join(env, " "))
}
