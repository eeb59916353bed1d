package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// lastJSONLine decodes the last line of out that is a JSON object.
func lastJSONLine(t *testing.T, what string, out []byte) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var m map[string]any
		if json.Unmarshal([]byte(lines[i]), &m) == nil {
			return m
		}
	}
	t.Fatalf("%s logged no JSON line:\n%s", what, out)
	return nil
}

// The plugin's log lines and the daemons' have one shape: the time under "ts" in RFC
// 3339 with nanoseconds, the level under "level" in lower case, the message under
// "msg", so that one query reads a CNI call's lines and ipamd's.
func TestLogLinesHaveTheDaemonsShape(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"nicpool-ipamd", "nicpool-webhook"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "./cmd/"+cmd)
		build.Dir = testenv.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	missing := filepath.Join(dir, "no-such-kubeconfig")
	lines := map[string]map[string]any{}
	for _, d := range []struct{ name, bin string }{{"ipamd", "nicpool-ipamd"}, {"webhook", "nicpool-webhook"}} {
		cmd := exec.Command(filepath.Join(dir, d.bin), "--kubeconfig", missing, "--node-name", "n1")
		if d.name == "webhook" {
			cmd.Args = cmd.Args[:3]
		}
		cmd.Env = append(os.Environ(), "KUBECONFIG="+missing)
		out, _ := cmd.CombinedOutput()
		lines[d.name] = lastJSONLine(t, d.name, out)
	}
	// The plugin with no ipamd to call: it logs the failed ADD.
	conf := `{"cniVersion":"1.0.0","name":"n","type":"nicpool","ipam":{"type":"nicpool","log_level":"debug","request_timeout":"1s"}}`
	plugin := exec.Command(goBinary)
	plugin.Stdin = strings.NewReader(conf)
	plugin.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=eth0", "CNI_PATH=" + dir,
		"CNI_ARGS=K8S_POD_NAMESPACE=a;K8S_POD_NAME=b;K8S_POD_UID=u"}
	var stderr bytes.Buffer
	plugin.Stderr = &stderr
	_ = plugin.Run()
	lines["plugin"] = lastJSONLine(t, "nicpool-cni", stderr.Bytes())

	for who, l := range lines {
		ts, ok := l["ts"].(string)
		if !ok {
			t.Errorf("%s: no \"ts\" string in %v", who, l)
			continue
		}
		at, err := time.Parse(cni.LogTimeFormat, ts)
		if err != nil || !strings.Contains(ts, ".") {
			t.Errorf("%s: ts %q is not RFC 3339 with fractional seconds (%v)", who, ts, err)
		}
		if time.Since(at) > time.Hour || time.Until(at) > time.Minute {
			t.Errorf("%s: ts %q is not now", who, ts)
		}
		if lv, _ := l["level"].(string); lv != strings.ToLower(lv) || lv == "" {
			t.Errorf("%s: level %q, want debug, info, warn or error", who, l["level"])
		}
		if _, ok := l["msg"].(string); !ok {
			t.Errorf("%s: no \"msg\" in %v", who, l)
		}
		if _, ok := l["time"]; ok {
			t.Errorf("%s: a second time key \"time\" in %v", who, l)
		}
	}
}
