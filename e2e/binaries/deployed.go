package binaries

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
)

var (
	deployedOnce sync.Once
	deployed     map[string][]string
	deployedErr  error
)

// DeployedEnv is the Go runtime settings (GOMEMLIMIT, GOGC, ...) that manifests/base
// gives the container named container ("ipamd", "webhook"), as NAME=value, so that
// the binaries are measured as they are deployed.
func DeployedEnv(container string) ([]string, error) {
	deployedOnce.Do(func() {
		objs, err := manifests.Render(filepath.Join(testenv.RepoRoot(), manifests.Dir))
		if err != nil {
			deployedErr = fmt.Errorf("render manifests/base for the containers' Go runtime settings: %w", err)
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
	return slices.Clone(deployed[container]), deployedErr
}

// DescribeEnv renders a process's extra environment for a benchmark's log.
func DescribeEnv(env []string) string {
	if len(env) == 0 {
		return "no Go runtime settings"
	}
	return fmt.Sprintf("%s as deployed", strings.Join(env, " "))
}
