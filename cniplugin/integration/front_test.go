package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	dto "github.com/prometheus/client_model/go"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/metrics"
)

// cniCalls is nicpool_ipamd_cni_calls_total{verb, result} of the suite's ipamd.
func cniCalls(t *testing.T, verb, result string) float64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.CNICalls.WithLabelValues(verb, result).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// withoutNicpoolCNI runs fn with nicpool-cni missing from the CNI bin directory, so
// that only what the front can do without it succeeds.
func withoutNicpoolCNI(t *testing.T, fn func()) {
	t.Helper()
	full := filepath.Join(suite.binDir, "nicpool-cni")
	hidden := filepath.Join(suite.work, "nicpool-cni.hidden")
	if err := os.Rename(full, hidden); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Rename(hidden, full); err != nil {
			t.Fatalf("put nicpool-cni back: %v", err)
		}
	}()
	fn()
}

// TestFrontServesThroughIPAMD: the front carries ADD, CHECK, GC, STATUS and DEL to
// ipamd, which runs them: they work with nicpool-cni gone. What it hands to
// nicpool-cni (VERSION, a network with a log file or another socket, a configuration
// over 1 MiB) then fails with an error that names nicpool-cni and says what to do.
func TestFrontServesThroughIPAMD(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("front-pool", "10.77.32.0/24", []string{"10.77.32.10-10.77.32.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.32.1")))
	nw := newNetwork(t, "front-net", "1.1.0", map[string]any{"default_ipv4_ippool": []string{"front-pool"}})
	p := newPod(t, "front-a", nil)

	served := cniCalls(t, "ADD", metrics.CNIServed)
	logFile := cniCalls(t, "ADD", cni.HandOffLogFile)
	withoutNicpoolCNI(t, func() {
		addr := addressOf(t, nw.mustAdd(t, p)).Addr().String()
		if got := cniCalls(t, "ADD", metrics.CNIServed) - served; got != 1 {
			t.Errorf("nicpool_ipamd_cni_calls_total{verb=ADD,result=served} grew by %v, want 1", got)
		}
		if a := allocations(t, "front-pool")[addr]; a.PodUID != string(p.obj.UID) || a.Interface != podInterface {
			t.Fatalf("front-pool records %s as %+v, want pod %s's %s", addr, a, p.obj.Name, podInterface)
		}
		if got := p.observe(t).addresses; len(got) != 1 || got[0].Addr().String() != addr {
			t.Errorf("the pod's interface holds %v, want %s", got, addr)
		}
		if err := nw.check(p); err != nil {
			t.Errorf("CHECK: %v", err)
		}
		if err := nw.status(); err != nil {
			t.Errorf("STATUS: %v", err)
		}
		if err := nw.del(p); err != nil {
			t.Errorf("DEL: %v", err)
		}
		if a, ok := allocations(t, "front-pool")[addr]; ok {
			t.Errorf("front-pool still records %s for %+v after DEL", addr, a)
		}

		handedOff := func(what string, err error) {
			t.Helper()
			var e *types.Error
			if !errors.As(err, &e) || e.Code != types.ErrTryAgainLater || !strings.Contains(e.Msg, "nicpool-cni") || !strings.Contains(e.Msg, "reinstall") {
				t.Errorf("%s without nicpool-cni: %v, want code %d naming nicpool-cni and saying to reinstall", what, err, types.ErrTryAgainLater)
			}
		}
		_, err := suite.cni.GetVersionInfo(context.Background(), "nicpool")
		handedOff("VERSION", err)
		for i, ipam := range []struct {
			what string
			keys map[string]any
		}{
			{"ADD on a network with log_file_path", map[string]any{"log_file_path": cniplugin.LogDir + "/front.log"}},
			{"ADD on a network naming another socket", map[string]any{"ipam_unix_socket_path": cniplugin.RunDir + "/other.sock"}},
			{"ADD of a configuration over 1 MiB", map[string]any{"padding": strings.Repeat("x", 1<<20)}},
		} {
			ipam.keys["default_ipv4_ippool"] = []string{"front-pool"}
			_, err := newNetwork(t, "front-net", "1.1.0", ipam.keys).add(newPod(t, fmt.Sprintf("front-b%d", i), nil))
			handedOff(ipam.what, err)
		}
		if got := cniCalls(t, "ADD", cni.HandOffLogFile) - logFile; got != 1 {
			t.Errorf("nicpool_ipamd_cni_calls_total{verb=ADD,result=log_file} grew by %v, want 1", got)
		}
		if n := len(allocations(t, "front-pool")); n != 0 {
			t.Errorf("front-pool records %d addresses after the refused ADDs, want none", n)
		}
	})

	// With nicpool-cni back, what was handed off works, and still through ipamd:
	// nicpool-cni opens the log and parses the whole configuration itself, then sends
	// ipamd a frame of what the verb reads, which ipamd serves (one protocol). ipamd
	// hands back the first network's calls (log_file_path); the front hands the
	// second's to nicpool-cni without asking ipamd (over 64 KiB).
	for i, c := range []struct {
		what     string
		keys     map[string]any
		handBack float64
	}{
		{"log_file_path", map[string]any{"log_file_path": cniplugin.LogDir + "/handed/back.log"}, 1},
		{"log_file_path and a configuration over 1 MiB", map[string]any{"log_file_path": cniplugin.LogDir + "/handed/large.log", "padding": strings.Repeat("x", 1<<20)}, 0},
	} {
		q := newPod(t, fmt.Sprintf("front-c%d", i), nil)
		c.keys["default_ipv4_ippool"] = []string{"front-pool"}
		nw := newNetwork(t, "front-net", "1.1.0", c.keys)
		served, logFile := cniCalls(t, "ADD", metrics.CNIServed), cniCalls(t, "ADD", cni.HandOffLogFile)
		addr := addressOf(t, nw.mustAdd(t, q)).Addr().String()
		if a := allocations(t, "front-pool")[addr]; a.PodUID != string(q.obj.UID) || a.Interface != podInterface {
			t.Errorf("%s: front-pool records %s as %+v, want pod %s's %s", c.what, addr, a, q.obj.Name, podInterface)
		}
		if got := cniCalls(t, "ADD", cni.HandOffLogFile) - logFile; got != c.handBack {
			t.Errorf("%s: nicpool_ipamd_cni_calls_total{verb=ADD,result=log_file} grew by %v, want %v (the front's call)", c.what, got, c.handBack)
		}
		if got := cniCalls(t, "ADD", metrics.CNIServed) - served; got != 1 {
			t.Errorf("%s: nicpool_ipamd_cni_calls_total{verb=ADD,result=served} grew by %v, want 1 (nicpool-cni's frame)", c.what, got)
		}
		logPath := filepath.Join(suite.logDir, strings.TrimPrefix(c.keys["log_file_path"].(string), cniplugin.LogDir))
		if log, err := os.ReadFile(logPath); err != nil || !bytes.Contains(log, []byte(`"msg":"allocated"`)) || !bytes.Contains(log, []byte(addr)) {
			t.Errorf("%s: the log: %v\n%s\nwant ipamd's line saying it allocated %s", c.what, err, log, addr)
		}
		if err := nw.del(q); err != nil {
			t.Errorf("%s: DEL: %v", c.what, err)
		}
		if a, ok := allocations(t, "front-pool")[addr]; ok {
			t.Errorf("%s: front-pool still records %s for %+v after DEL", c.what, addr, a)
		}
	}
	if _, err := suite.cni.GetVersionInfo(context.Background(), "nicpool"); err != nil {
		t.Errorf("VERSION: %v", err)
	}
}

// TestFrontAnswersAsNicpoolCNI: for every bad input of the catalogue below, a call
// the front forwards to ipamd prints the very error nicpool-cni prints for it and
// exits the same way, and allocates nothing.
func TestFrontAnswersAsNicpoolCNI(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("parity-pool", "10.77.33.0/24", []string{"10.77.33.10-10.77.33.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.33.1")))
	p := newPod(t, "parity-a", nil)
	conf := func(version, ipam string) string {
		return fmt.Sprintf(`{"cniVersion":%q,"name":"parity-net","type":"nicpool","ipam":{"type":"nicpool","default_ipv4_ippool":["parity-pool"]%s}}`, version, ipam)
	}
	env := map[string]string{
		"CNI_COMMAND":     "ADD",
		"CNI_CONTAINERID": p.containerID,
		"CNI_NETNS":       p.netns.Path(),
		"CNI_IFNAME":      podInterface,
		"CNI_PATH":        suite.binDir,
		"CNI_ARGS":        "K8S_POD_NAMESPACE=" + p.obj.Namespace + ";K8S_POD_NAME=" + p.obj.Name + ";K8S_POD_UID=" + string(p.obj.UID),
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range env {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tt := range []struct {
		name  string
		env   map[string]string
		stdin string
		code  uint
	}{
		{"no CNI_CONTAINERID", with("CNI_CONTAINERID", ""), conf("1.1.0", ""), types.ErrInvalidEnvironmentVariables},
		{"container ID with a slash", with("CNI_CONTAINERID", "../x"), conf("1.1.0", ""), types.ErrInvalidEnvironmentVariables},
		{"interface name too long", with("CNI_IFNAME", "abcdefghijklmnop"), conf("1.1.0", ""), types.ErrInvalidEnvironmentVariables},
		{"interface name with a slash", with("CNI_IFNAME", "a/b"), conf("1.1.0", ""), types.ErrInvalidEnvironmentVariables},
		{"no CNI_PATH", with("CNI_PATH", ""), conf("1.1.0", ""), types.ErrInvalidEnvironmentVariables},
		{"unknown verb", with("CNI_COMMAND", "ATTACH"), conf("1.1.0", ""), types.ErrInvalidEnvironmentVariables},
		{"stdin not JSON", env, `{"cniVersion":`, types.ErrDecodingFailure},
		{"no network name", env, `{"cniVersion":"1.1.0","ipam":{"type":"nicpool"}}`, types.ErrInvalidNetworkConfig},
		{"network name with a space", env, `{"cniVersion":"1.1.0","name":"a b","ipam":{"type":"nicpool"}}`, types.ErrInvalidNetworkConfig},
		{"unsupported cniVersion", env, conf("9.9.9", ""), types.ErrIncompatibleCNIVersion},
		{"no ipam section", env, `{"cniVersion":"1.1.0","name":"parity-net","type":"nicpool"}`, types.ErrInvalidNetworkConfig},
		{"pool name with a space", env, conf("1.1.0", `,"default_ipv6_ippool":["a b"]`), types.ErrInvalidNetworkConfig},
		{"log level unknown", env, conf("1.1.0", `,"log_level":"loud"`), types.ErrInvalidNetworkConfig},
		{"request_timeout too long", env, conf("1.1.0", `,"request_timeout":"1h"`), types.ErrInvalidNetworkConfig},
		{"socket path outside /run/nicpool", env, conf("1.1.0", `,"ipam_unix_socket_path":"/etc/shadow"`), types.ErrInvalidNetworkConfig},
		{"match_master_subnet", env, conf("1.1.0", `,"match_master_subnet":true`), types.ErrInvalidNetworkConfig},
		{"no pod in CNI_ARGS", with("CNI_ARGS", "IgnoreUnknown=1"), conf("1.1.0", ""), types.ErrInvalidEnvironmentVariables},
		{"CHECK without prevResult", with("CNI_COMMAND", "CHECK"), conf("1.1.0", ""), types.ErrInvalidNetworkConfig},
		{"GC without valid attachments", with("CNI_COMMAND", "GC"), conf("1.1.0", ""), types.ErrInvalidNetworkConfig},
		{"GC before CNI 1.1.0", with("CNI_COMMAND", "GC"), conf("1.0.0", ""), types.ErrIncompatibleCNIVersion},
		// As the plugin resolves it: its own network namespace.
		{"CNI_NETNS is the plugin's own namespace", with("CNI_NETNS", "/proc/thread-self/ns/net"), conf("1.1.0", ""), types.ErrInvalidNetNS},
	} {
		t.Run(tt.name, func(t *testing.T) {
			front, frontCode := runPlugin(t, "nicpool", tt.env, tt.stdin)
			full, fullCode := runPlugin(t, "nicpool-cni", tt.env, tt.stdin)
			if front != full || frontCode != fullCode {
				t.Errorf("the front printed %q and exited %d; nicpool-cni printed %q and exited %d", front, frontCode, full, fullCode)
			}
			// The last document printed is the error (ADD into the plugin's own
			// namespace prints its result first, as the CNI library does).
			var e types.Error
			dec := json.NewDecoder(strings.NewReader(front))
			for dec.More() {
				if err := dec.Decode(&e); err != nil {
					break
				}
			}
			if e.Code != tt.code || frontCode != 1 {
				t.Errorf("the front printed %q and exited %d, want CNI error %d", front, frontCode, tt.code)
			}
			// The plugin's own namespace is refused after ADD, as the CNI library does:
			// the address ADD took is released by the runtime's DEL.
			if tt.code != types.ErrInvalidNetNS {
				if n := len(allocations(t, "parity-pool")); n != 0 {
					t.Errorf("parity-pool records %d addresses, want none", n)
				}
			}
		})
	}
	_, _ = runPlugin(t, "nicpool-cni", with("CNI_COMMAND", "DEL"), conf("1.1.0", ""))
}

// runPlugin runs the binary name of the CNI bin directory as a runtime would, from
// the node's network namespace, and returns its stdout and exit code.
func runPlugin(t *testing.T, name string, env map[string]string, stdin string) (string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := suite.node.do(func() error {
		cmd := exec.Command(filepath.Join(suite.binDir, name))
		cmd.Env = []string{cniplugin.EnvRunDir + "=" + suite.runDir, cniplugin.EnvLogDir + "=" + suite.logDir}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return stdout.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v\n%s", name, err, stderr.String())
	}
	return stdout.String(), 0
}
