package cni

import (
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/ipamd/api"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		check func(t *testing.T, c *Config)
	}{{
		name:  "defaults",
		stdin: `{"cniVersion":"1.0.0","name":"net1","type":"macvlan","ipam":{"type":"nicpool"}}`,
		check: func(t *testing.T, c *Config) {
			want := Config{CNIVersion: "1.0.0", Network: "net1", SocketPath: api.DefaultSocketPath, Timeout: DefaultTimeout, LogLevel: slog.LevelInfo}
			if c.CNIVersion != want.CNIVersion || c.Network != want.Network || c.SocketPath != want.SocketPath ||
				c.Timeout != want.Timeout || c.LogLevel != want.LogLevel || c.CleanGateway || c.LogFile != "" ||
				c.DefaultIPv4Pools != nil || c.DefaultIPv6Pools != nil || c.HasValidAttachments {
				t.Errorf("got %+v, want %+v", *c, want)
			}
		},
	}, {
		name: "spiderpool keys",
		stdin: `{"cniVersion":"0.3.1","name":"macvlan-pod-network","type":"macvlan","master":"ens256","ipam":{
			"type":"nicpool","ipam_unix_socket_path":"/var/run/spidernet/spiderpool.sock",
			"default_ipv4_ippool":["v4-a","v4-b"],"default_ipv6_ippool":["v6"],"clean_gateway":true,
			"log_file_path":"/var/log/spidernet/spiderpool.log","log_file_max_size":"100M","log_file_max_age":"30d",
			"log_file_max_count":7,"log_level":"DEBUG"}}`,
		check: func(t *testing.T, c *Config) {
			// spiderpool's own socket and log read as nicpool's defaults.
			if c.SocketPath != api.DefaultSocketPath || !c.CleanGateway || c.Refused != nil ||
				!slices.Equal(c.DefaultIPv4Pools, []string{"v4-a", "v4-b"}) || !slices.Equal(c.DefaultIPv6Pools, []string{"v6"}) ||
				c.LogFile != "" || c.LogLevel != slog.LevelDebug {
				t.Errorf("got %+v", *c)
			}
			nc := c.NetworkConfig()
			if nc.Name != "macvlan-pod-network" || !nc.CleanGateway || !slices.Equal(nc.DefaultIPv4Pools, c.DefaultIPv4Pools) {
				t.Errorf("network config %+v", nc)
			}
		},
	}, {
		name:  "single pool name",
		stdin: `{"cniVersion":"1.1.0","name":"n","ipam":{"default_ipv4_ippool":"v4"}}`,
		check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.DefaultIPv4Pools, []string{"v4"}) {
				t.Errorf("pools %v", c.DefaultIPv4Pools)
			}
		},
	}, {
		name:  "timeout as duration",
		stdin: `{"cniVersion":"1.1.0","name":"n","ipam":{"request_timeout":"90s"}}`,
		check: func(t *testing.T, c *Config) {
			if c.Timeout != 90*time.Second {
				t.Errorf("timeout %s", c.Timeout)
			}
		},
	}, {
		name:  "timeout in seconds",
		stdin: `{"cniVersion":"1.1.0","name":"n","ipam":{"request_timeout":5}}`,
		check: func(t *testing.T, c *Config) {
			if c.Timeout != 5*time.Second {
				t.Errorf("timeout %s", c.Timeout)
			}
		},
	}, {
		name:  "socket path cleaned",
		stdin: `{"cniVersion":"1.1.0","name":"n","ipam":{"ipam_unix_socket_path":"/run//nicpool/./ipamd.sock"}}`,
		check: func(t *testing.T, c *Config) {
			if c.SocketPath != "/run/nicpool/ipamd.sock" {
				t.Errorf("socket %s", c.SocketPath)
			}
		},
	}, {
		name:  "valid attachments",
		stdin: `{"cniVersion":"1.1.0","name":"n","ipam":{},"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"net1"}]}`,
		check: func(t *testing.T, c *Config) {
			if !c.HasValidAttachments || !slices.Equal(c.ValidAttachments, []types.GCAttachment{{ContainerID: "c1", IfName: "net1"}}) {
				t.Errorf("attachments %v %v", c.HasValidAttachments, c.ValidAttachments)
			}
		},
	}, {
		name:  "empty valid attachments mean none is valid",
		stdin: `{"cniVersion":"1.1.0","name":"n","ipam":{},"cni.dev/valid-attachments":[]}`,
		check: func(t *testing.T, c *Config) {
			if !c.HasValidAttachments || len(c.ValidAttachments) != 0 {
				t.Errorf("attachments %v %v", c.HasValidAttachments, c.ValidAttachments)
			}
		},
	}, {
		name:  "legacy attachments key",
		stdin: `{"cniVersion":"1.1.0","name":"n","ipam":{},"cni.dev/attachments":[{"containerID":"c2","ifname":"eth0"}]}`,
		check: func(t *testing.T, c *Config) {
			if !c.HasValidAttachments || len(c.ValidAttachments) != 1 || c.ValidAttachments[0].ContainerID != "c2" {
				t.Errorf("attachments %v %v", c.HasValidAttachments, c.ValidAttachments)
			}
		},
	}, {
		name:  "broken prevResult does not fail parsing",
		stdin: `{"cniVersion":"1.0.0","name":"n","ipam":{},"prevResult":{"ips":[{"address":"nonsense"}]}}`,
		check: func(t *testing.T, c *Config) {
			if _, err := c.PrevResult(); cniCode(err) != types.ErrDecodingFailure {
				t.Errorf("PrevResult error %v, want code %d", err, types.ErrDecodingFailure)
			}
		},
	}, {
		name:  "prevResult parsed in the config's version",
		stdin: `{"cniVersion":"0.4.0","name":"n","ipam":{},"prevResult":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/24"}]}}`,
		check: func(t *testing.T, c *Config) {
			prev, err := c.PrevResult()
			if err != nil {
				t.Fatal(err)
			}
			r, err := ReservationFromResult(prev, "eth0")
			if err != nil || r.String() != "10.0.0.2/24" {
				t.Errorf("reservation %v, %v", r, err)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.stdin))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		code  uint
		// field is what the message must name, so that a user knows what to fix.
		field string
	}{
		{"not JSON", `{"name":`, types.ErrDecodingFailure, "JSON"},
		{"trailing data", `{"name":"n","ipam":{}} {}`, types.ErrDecodingFailure, "JSON"},
		{"no ipam", `{"cniVersion":"1.0.0","name":"n"}`, types.ErrInvalidNetworkConfig, `"ipam"`},
		{"null ipam", `{"cniVersion":"1.0.0","name":"n","ipam":null}`, types.ErrInvalidNetworkConfig, `"ipam"`},
		{"ipam not an object", `{"cniVersion":"1.0.0","name":"n","ipam":"nicpool"}`, types.ErrInvalidNetworkConfig, "ipam:"},
		{"no name", `{"cniVersion":"1.0.0","ipam":{}}`, types.ErrInvalidNetworkConfig, "name"},
		{"name not a string", `{"cniVersion":"1.0.0","name":5,"ipam":{}}`, types.ErrInvalidNetworkConfig, "name"},
		{"socket not a string", `{"name":"n","ipam":{"ipam_unix_socket_path":1}}`, types.ErrInvalidNetworkConfig, "ipam.ipam_unix_socket_path"},
		{"pools of numbers", `{"name":"n","ipam":{"default_ipv4_ippool":[1]}}`, types.ErrInvalidNetworkConfig, "ipam.default_ipv4_ippool"},
		{"empty pool name", `{"name":"n","ipam":{"default_ipv6_ippool":["ok",""]}}`, types.ErrInvalidNetworkConfig, "ipam.default_ipv6_ippool[1]"},
		{"pool name with space", `{"name":"n","ipam":{"default_ipv4_ippool":"a b"}}`, types.ErrInvalidNetworkConfig, "ipam.default_ipv4_ippool[0]"},
		{"clean gateway as string", `{"name":"n","ipam":{"clean_gateway":"yes"}}`, types.ErrInvalidNetworkConfig, "ipam.clean_gateway"},
		{"timeout not a duration", `{"name":"n","ipam":{"request_timeout":"soon"}}`, types.ErrInvalidNetworkConfig, "ipam.request_timeout"},
		{"timeout zero", `{"name":"n","ipam":{"request_timeout":0}}`, types.ErrInvalidNetworkConfig, "ipam.request_timeout"},
		{"timeout negative", `{"name":"n","ipam":{"request_timeout":"-3s"}}`, types.ErrInvalidNetworkConfig, "ipam.request_timeout"},
		{"timeout huge", `{"name":"n","ipam":{"request_timeout":1e300}}`, types.ErrInvalidNetworkConfig, "ipam.request_timeout"},
		{"timeout a bool", `{"name":"n","ipam":{"request_timeout":true}}`, types.ErrInvalidNetworkConfig, "ipam.request_timeout"},
		{"match_master_subnet not a bool", `{"name":"n","ipam":{"match_master_subnet":"yes"}}`, types.ErrInvalidNetworkConfig, "ipam.match_master_subnet"},
		{"unknown log level", `{"name":"n","ipam":{"log_level":"chatty"}}`, types.ErrInvalidNetworkConfig, "ipam.log_level"},
		{"prevResult a number", `{"name":"n","ipam":{},"prevResult":5}`, types.ErrInvalidNetworkConfig, "prevResult"},
		{"prevResult a list", `{"name":"n","ipam":{},"prevResult":[{}]}`, types.ErrInvalidNetworkConfig, "prevResult"},
		{"dns a string", `{"name":"n","ipam":{},"dns":"8.8.8.8"}`, types.ErrInvalidNetworkConfig, "dns"},
		{"capabilities a list", `{"name":"n","ipam":{},"capabilities":["ips"]}`, types.ErrInvalidNetworkConfig, "capabilities"},
		{"attachment without ifname", `{"name":"n","ipam":{},"cni.dev/valid-attachments":[{"containerID":"c"}]}`, types.ErrInvalidNetworkConfig, "cni.dev/valid-attachments[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.stdin))
			if cniCode(err) != tt.code {
				t.Fatalf("error %v: want CNI code %d", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %q", err, tt.field)
			}
		})
	}
}

// A network configuration is written by whoever may create a NetworkAttachmentDefinition
// and read by a root plugin: every path outside the plugin's two directories is
// refused on its text alone, before any file is looked at, with a message naming the
// key. The configuration still parses, so that DEL can let the pod go.
func TestParseConfigRefusesPathsOutsideItsDirectories(t *testing.T) {
	tests := []struct {
		name, ipam, key string
	}{
		{"socket elsewhere", `"ipam_unix_socket_path":"/etc/shadow"`, "ipam.ipam_unix_socket_path"},
		{"socket relative", `"ipam_unix_socket_path":"ipamd.sock"`, "ipam.ipam_unix_socket_path"},
		{"socket climbing out", `"ipam_unix_socket_path":"/run/nicpool/../docker.sock"`, "ipam.ipam_unix_socket_path"},
		{"socket is the directory", `"ipam_unix_socket_path":"/run/nicpool"`, "ipam.ipam_unix_socket_path"},
		{"socket in a sibling with the same prefix", `"ipam_unix_socket_path":"/run/nicpoolx/ipamd.sock"`, "ipam.ipam_unix_socket_path"},
		{"socket through /var/run", `"ipam_unix_socket_path":"/var/run/nicpool/ipamd.sock"`, "ipam.ipam_unix_socket_path"},
		{"socket path too long", `"ipam_unix_socket_path":"/run/nicpool/` + strings.Repeat("a", 5000) + `"`, "ipam.ipam_unix_socket_path"},
		{"log elsewhere", `"log_file_path":"/etc/cron.d/x"`, "ipam.log_file_path"},
		{"log relative", `"log_file_path":"cni.log"`, "ipam.log_file_path"},
		{"log climbing out", `"log_file_path":"/var/log/nicpool/a/../../../../etc/passwd"`, "ipam.log_file_path"},
		{"log is the directory", `"log_file_path":"/var/log/nicpool/"`, "ipam.log_file_path"},
		{"log in a sibling with the same prefix", `"log_file_path":"/var/log/nicpool.d/cni.log"`, "ipam.log_file_path"},
		{"log in the run directory", `"log_file_path":"/run/nicpool/cni.log"`, "ipam.log_file_path"},
		{"log two directories deep", `"log_file_path":"/var/log/nicpool/a/b/cni.log"`, "ipam.log_file_path"},
		{"log forty directories deep", `"log_file_path":"/var/log/nicpool` + strings.Repeat("/d", 40) + `/x.log"`, "ipam.log_file_path"},
		{"log name longer than NAME_MAX", `"log_file_path":"/var/log/nicpool/` + strings.Repeat("n", 256) + `"`, "ipam.log_file_path"},
		{"log directory name longer than NAME_MAX", `"log_file_path":"/var/log/nicpool/` + strings.Repeat("d", 256) + `/cni.log"`, "ipam.log_file_path"},
		{"spiderpool's master subnet matching", `"match_master_subnet":true`, "ipam.match_master_subnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool",` + tt.ipam + `}}`))
			if err != nil {
				t.Fatalf("ParseConfig: %v: a refused key must leave a config DEL can use", err)
			}
			if c.Refused == nil || c.Refused.Code != types.ErrInvalidNetworkConfig || !strings.HasPrefix(c.Refused.Msg, tt.key+": ") {
				t.Fatalf("Refused = %v, want code %d naming %s", c.Refused, types.ErrInvalidNetworkConfig, tt.key)
			}
			if len(c.Refused.Msg) > 1000 {
				t.Errorf("the message repeats a huge path: %d bytes", len(c.Refused.Msg))
			}
			if c.SocketPath != "" && !strings.HasPrefix(c.SocketPath, RunDir+"/") || c.LogFile != "" && !strings.HasPrefix(c.LogFile, LogDir+"/") {
				t.Errorf("a refused path is kept: socket %q, log %q", c.SocketPath, c.LogFile)
			}
		})
	}
}

func TestParseConfigAcceptsPathsBeneathItsDirectories(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"ipam_unix_socket_path":"/run/nicpool/node-1/ipamd.sock","log_file_path":"/var/log/nicpool/net1/./cni.log","match_master_subnet":false}}`))
	if err != nil || c.Refused != nil {
		t.Fatalf("ParseConfig: %v, refused %v", err, c.Refused)
	}
	if c.SocketPath != "/run/nicpool/node-1/ipamd.sock" || c.LogFile != "/var/log/nicpool/net1/cni.log" {
		t.Errorf("socket %q, log %q", c.SocketPath, c.LogFile)
	}
	if !strings.HasPrefix(api.DefaultSocketPath, RunDir+"/") {
		t.Errorf("ipamd's default socket %s is not beneath %s", api.DefaultSocketPath, RunDir)
	}
}

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1;FOO=bar=baz")
	if err != nil {
		t.Fatal(err)
	}
	want := PodArgs{Pod: api.Pod{Namespace: "ns1", Name: "web-0", UID: "u-1"}, InfraContainerID: "abc"}
	if a != want {
		t.Errorf("got %+v, want %+v", a, want)
	}
	if err := a.requirePod(); err != nil {
		t.Errorf("requirePod: %v", err)
	}

	if a, err := ParseArgs(""); err != nil || a != (PodArgs{}) {
		t.Errorf("empty CNI_ARGS: %+v, %v", a, err)
	}
	if _, err := ParseArgs("K8S_POD_NAME"); err == nil || !strings.Contains(err.Error(), "KEY=VALUE") {
		t.Errorf("malformed CNI_ARGS: %v", err)
	}
	a, _ = ParseArgs("K8S_POD_NAME=x")
	if err := a.requirePod(); err == nil || !strings.Contains(err.Error(), "K8S_POD_NAMESPACE") {
		t.Errorf("missing namespace: %v", err)
	}
}

// cniCode is the CNI code of err, 0 when it is not a CNI error.
func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// What nicpool-cni sends ipamd for a verb (Trimmed, written as api.Conf) parses to the
// configuration the verb reads from the whole document: the same network, version,
// timeout, level, pools and gateway for ADD and STATUS, the same prevResult for CHECK,
// the same valid attachments for GC; and it holds neither the log file, nor the
// socket, nor any key the plugin does not read.
func TestTrimmedConfigParsesAsTheOriginal(t *testing.T) {
	whole := `{"cniVersion":"1.1.0","name":"net1","type":"macvlan","master":"eth0","dns":{"nameservers":["10.0.0.10"]},` +
		`"ipam":{"type":"spiderpool","ipam_unix_socket_path":"/run/nicpool/other.sock","log_file_path":"/var/log/nicpool/net1/cni.log","log_level":"debug",` +
		`"request_timeout":"45s","default_ipv4_ippool":["a","b"],"default_ipv6_ippool":"c","clean_gateway":true,"padding":"` + strings.Repeat("x", 100<<10) + `"},` +
		`"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.6.0.7/16","gateway":"10.6.0.1"}],"unknown":"` + strings.Repeat("y", 100<<10) + `"},` +
		`"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"net1"},{"containerID":"c2","ifname":"eth0"}]}`
	for _, verb := range []string{"ADD", "DEL", "CHECK", "GC", "STATUS"} {
		t.Run(verb, func(t *testing.T) {
			c, err := ParseConfig([]byte(whole))
			if err != nil {
				t.Fatal(err)
			}
			prev, err := c.PrevResult()
			if err != nil {
				t.Fatal(err)
			}
			conf, err := c.Trimmed(verb, prev)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(conf)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) > 1024 || strings.Contains(string(raw), "log_file_path") || strings.Contains(string(raw), "socket") || strings.Contains(string(raw), "master") {
				t.Fatalf("trimmed for %s: %d bytes: %.300s", verb, len(raw), raw)
			}
			got, err := ParseConfig(raw)
			if err != nil {
				t.Fatalf("the trimmed configuration does not parse: %v: %s", err, raw)
			}
			if got.Network != "net1" || got.CNIVersion != "1.1.0" || got.Timeout != 45*time.Second || got.LogLevel != slog.LevelDebug ||
				got.SocketPath != api.DefaultSocketPath || got.LogFile != "" || got.Refused != nil {
				t.Errorf("trimmed for %s parses as %+v", verb, got)
			}
			pools := verb == "ADD" || verb == "STATUS"
			if pools != (slices.Equal(got.DefaultIPv4Pools, []string{"a", "b"}) && slices.Equal(got.DefaultIPv6Pools, []string{"c"}) && got.CleanGateway) {
				t.Errorf("trimmed for %s: pools %v %v, clean gateway %v", verb, got.DefaultIPv4Pools, got.DefaultIPv6Pools, got.CleanGateway)
			}
			if (verb == "GC") != (got.HasValidAttachments && len(got.ValidAttachments) == 2 && got.ValidAttachments[1].ContainerID == "c2" && got.ValidAttachments[1].IfName == "eth0") {
				t.Errorf("trimmed for %s: valid attachments %v", verb, got.ValidAttachments)
			}
			gotPrev, err := got.PrevResult()
			if err != nil {
				t.Fatal(err)
			}
			if verb == "CHECK" {
				want, _ := ReservationFromResult(prev, "net1")
				have, err := ReservationFromResult(gotPrev, "net1")
				if err != nil || !have.Equal(want) || len(have) != 1 {
					t.Errorf("trimmed prevResult holds %v (%v), want %v", have, err, want)
				}
			} else if gotPrev != nil {
				t.Errorf("trimmed for %s carries prevResult", verb)
			}
		})
	}
}
