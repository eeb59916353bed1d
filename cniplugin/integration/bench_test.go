package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// BenchmarkPluginAddDel is one pod interface's life as the plugin sees it: the main
// plugin execs it for ADD and later for DEL, each a round trip to the real ipamd, which
// writes the pool and the SpiderEndpoint to the real API server. It reports the
// plugin's own CPU per exec beside the wall time of the pair: for the front (nicpool,
// as installed), whose calls ipamd runs, and for nicpool-cni run directly, as the front
// hands calls to it.
func BenchmarkPluginAddDel(b *testing.B) {
	ctx := context.Background()
	fixtures.CreatePool(b, suite.env.Client, fixtures.Pool("bench-pool", "10.77.30.0/24", []string{"10.77.30.10-10.77.30.250"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.30.1")))
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-a", Namespace: testNamespace},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := suite.env.Client.Create(ctx, obj); err != nil {
		b.Fatal(err)
	}
	defer suite.env.Client.Delete(ctx, obj)
	conf := `{"cniVersion":"1.1.0","name":"bench-net","type":"macvlan","ipam":{"type":"nicpool","default_ipv4_ippool":["bench-pool"]}}`
	for _, name := range []string{"nicpool", "nicpool-cni"} {
		b.Run(name, func(b *testing.B) { benchAddDel(b, filepath.Join(suite.binDir, name), conf, obj) })
	}
}

func benchAddDel(b *testing.B, plugin, conf string, obj *corev1.Pod) {
	var cpu float64
	run := func(verb, container string) {
		cmd := exec.Command(plugin)
		cmd.Env = []string{
			"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + container, "CNI_NETNS=/var/run/netns/bench", "CNI_IFNAME=" + podInterface,
			"CNI_PATH=" + suite.binDir,
			cniplugin.EnvRunDir + "=" + suite.runDir, cniplugin.EnvLogDir + "=" + suite.logDir,
			"CNI_ARGS=K8S_POD_NAMESPACE=" + testNamespace + ";K8S_POD_NAME=bench-a;K8S_POD_UID=" + string(obj.UID),
			// The plugin checks CNI_NETNS only after a successful ADD; no namespace is
			// needed to measure it alone.
			"CNI_NETNS_OVERRIDE=1",
		}
		cmd.Stdin = strings.NewReader(conf)
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s: %v: %s", verb, err, out.String())
		}
		if verb == "ADD" && !json.Valid(out.Bytes()) {
			b.Fatalf("ADD printed %q", out.String())
		}
		cpu += cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	}
	i := 0
	for b.Loop() {
		container := fmt.Sprintf("bench-%s-%d", filepath.Base(plugin), i)
		i++
		run("ADD", container)
		run("DEL", container)
	}
	b.ReportMetric(cpu*1e3/float64(2*b.N), "plugin-cpu-ms/exec")
}
