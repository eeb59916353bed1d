package binaries

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
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
// the binaries are measured as they are deployed: as the kubelet computes them, with
// the container's own resources (resourceFieldRef) and $(VAR) references expanded.
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
				vars, err := ContainerEnv(c, nil)
				if err != nil {
					deployedErr = fmt.Errorf("%s %s container %s: %w", o.GetKind(), o.GetName(), name, err)
					return
				}
				for _, kv := range vars {
					if strings.HasPrefix(kv, "GO") {
						deployed[name] = append(deployed[name], kv)
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

// ContainerEnv is a container's environment as the kubelet sets it, as NAME=value:
// literal values, references to earlier variables ($(NAME), left as written when NAME
// is not defined before), the container's own resources (resourceFieldRef) and, when
// fields is given, the pod's fields (fieldRef: fields maps a fieldPath such as
// metadata.namespace or spec.nodeName to its value; a path it lacks is an error).
// Without fields, fieldRef variables are left out. Other sources (ConfigMaps,
// Secrets) are an error.
func ContainerEnv(c map[string]any, fields map[string]string) ([]string, error) {
	env, _, _ := unstructured.NestedSlice(c, "env")
	values := map[string]string{}
	var out []string
	for _, e := range env {
		e, _ := e.(map[string]any)
		n, _ := e["name"].(string)
		var v string
		if lit, ok := e["value"].(string); ok {
			v = Expand(lit, values)
		} else if ref, ok, _ := unstructured.NestedMap(e, "valueFrom", "resourceFieldRef"); ok {
			r, err := resourceValue(c, ref)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", n, err)
			}
			v = r
		} else if path, ok, _ := unstructured.NestedString(e, "valueFrom", "fieldRef", "fieldPath"); ok {
			if fields == nil {
				continue
			}
			if v, ok = fields[path]; !ok {
				return nil, fmt.Errorf("env %s: fieldRef %s is not known here", n, path)
			}
		} else if _, ok := e["valueFrom"]; ok {
			return nil, fmt.Errorf("env %s: only values, fieldRef and resourceFieldRef are known here", n)
		}
		values[n] = v
		out = append(out, n+"="+v)
	}
	return out, nil
}

// Expand replaces each $(NAME) of s whose NAME values holds, as the kubelet expands a
// container's arguments and variables; other references stay as written.
func Expand(s string, values map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if d, ok := values[m[2:len(m)-1]]; ok {
			return d
		}
		return m
	})
}

var varRef = regexp.MustCompile(`\$\([A-Za-z_][A-Za-z0-9_.-]*\)`)

// resourceValue is a resourceFieldRef's value: the container's limits.<r> or
// requests.<r> divided by the divisor, rounded up, as the kubelet computes it.
func resourceValue(c map[string]any, ref map[string]any) (string, error) {
	res, _ := ref["resource"].(string)
	section, name, ok := strings.Cut(res, ".")
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %q: want limits.<resource> or requests.<resource>", res)
	}
	q, ok, _ := unstructured.NestedString(c, "resources", section, name)
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %s: the container sets no %s", res, res)
	}
	quantity, err := resource.ParseQuantity(q)
	if err != nil {
		return "", err
	}
	divisor := resource.MustParse("1")
	if d, ok := ref["divisor"].(string); ok {
		if divisor, err = resource.ParseQuantity(d); err != nil {
			return "", err
		}
	}
	return strconv.FormatInt(int64(math.Ceil(float64(quantity.Value())/float64(divisor.Value()))), 10), nil
}
