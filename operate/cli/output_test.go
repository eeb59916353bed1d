package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/operate/inspect"
)

// Every command prints through cli-runtime's printers: a versioned list that
// jsonpath, go-template, custom-columns, name, JSON and YAML all read.
func TestOutputFormats(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "output")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("output-v4", "10.39.0.0/16", []string{"10.39.0.10-10.39.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("output-b", "10.40.0.0/16", []string{"10.40.0.10-10.40.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("output-c", "10.41.0.0/16", []string{"10.41.0.10-10.41.0.20"}))
	pod := runPodWith(t, ns, "web-0", map[string]string{"app": "web"}, nic{name: "eth0", v4: "output-v4"})
	runPodWith(t, ns, "other", map[string]string{"app": "other"}, nic{name: "eth0", v4: "output-v4"})
	addr := endpointAddr(t, pod, "eth0", 4)

	// The example: the first pool's name.
	out, errOut, code := kubectl(t, "pools", "-o", "jsonpath={.items[0].metadata.name}")
	g.Expect(code).To(Equal(0), errOut)
	var reps []inspect.PoolReport
	kubectlJSON(t, &reps, "pools")
	g.Expect(out).To(Equal(reps[0].Name))

	out, errOut, code = kubectl(t, "pools", "-o", "name")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(ContainElement("poolusage.nicpool.io/output-v4"))

	out, _, _ = kubectl(t, "pools", "-o", `go-template={{range .items}}{{.metadata.name}}={{.status.total}} {{end}}`)
	g.Expect(out).To(ContainSubstring("output-v4=11 "))

	out, _, _ = kubectl(t, "pools", "-o", "custom-columns=POOL:.metadata.name,TOTAL:.status.total", "--no-headers")
	g.Expect(out).To(MatchRegexp(`(?m)^output-v4\s+11$`))

	out, _, _ = kubectl(t, "who", addr, "-o", "yaml")
	var list map[string]any
	g.Expect(yaml.Unmarshal([]byte(out), &list)).To(Succeed())
	g.Expect(list).To(HaveKeyWithValue("apiVersion", "nicpool.io/v1alpha1"))
	g.Expect(list).To(HaveKeyWithValue("kind", "AddressHolderList"))
	g.Expect(out).To(ContainSubstring("name: " + addr))

	// Lists read in pages of one item each still list every pool.
	var paged []inspect.PoolReport
	kubectlJSON(t, &paged, "pools", "--chunk-size=1")
	g.Expect(len(paged)).To(Equal(len(reps)))
	g.Expect(len(paged)).To(BeNumerically(">=", 3))

	// check: valid JSON, a ViolationList.
	out, errOut, code = kubectl(t, "check", "-o", "json")
	g.Expect(code).To(Or(Equal(0), Equal(cli.ExitFinding)), errOut)
	var report struct {
		APIVersion, Kind string
		Items            []json.RawMessage
	}
	g.Expect(json.Unmarshal([]byte(out), &report)).To(Succeed(), out)
	g.Expect(report.APIVersion).To(Equal("nicpool.io/v1alpha1"))
	g.Expect(report.Kind).To(Equal("ViolationList"))

	// pod: NAMESPACE/NAME, -l, -A.
	out, errOut, code = kubectl(t, "pod", ns+"/web-0")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(HavePrefix(fmt.Sprintf("Pod %s/web-0  UID %s", ns, pod.UID)))
	out, _, code = kubectl(t, "pod", "-l", "app=web", "-n", ns, "-o", "name")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(Equal("podaddresses.nicpool.io/web-0\n"))
	out, _, code = kubectl(t, "pod", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}`)
	g.Expect(code).To(Equal(0))
	g.Expect(strings.Fields(out)).To(ContainElements(ns+"/web-0", ns+"/other"))
	out, _, code = kubectl(t, "pod", "-A", "-l", "app=web", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}`)
	g.Expect(code).To(Equal(0))
	g.Expect(strings.Fields(out)).To(ContainElement(ns + "/web-0"))
	g.Expect(strings.Fields(out)).NotTo(ContainElement(ns + "/other"))

	_, errOut, code = kubectl(t, "pod", "a/b/c")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring(`pod "a/b/c": give NAME (in --namespace) or NAMESPACE/NAME`))
	_, errOut, code = kubectl(t, "pod", "web-0", "-A")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring("not both"))
	_, errOut, code = kubectl(t, "pools", "-o", "jsonpath={.items[")
	g.Expect(code).To(Equal(cli.ExitError), errOut)
}
