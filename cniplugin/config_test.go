package cniplugin

import (
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
			if c.SocketPath != "/var/run/spidernet/spiderpool.sock" || !c.CleanGateway ||
				!slices.Equal(c.DefaultIPv4Pools, []string{"v4-a", "v4-b"}) || !slices.Equal(c.DefaultIPv6Pools, []string{"v6"}) ||
				c.LogFile != "/var/log/spidernet/spiderpool.log" || c.LogLevel != slog.LevelDebug {
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
		{"relative socket", `{"name":"n","ipam":{"ipam_unix_socket_path":"ipamd.sock"}}`, types.ErrInvalidNetworkConfig, "ipam.ipam_unix_socket_path"},
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
		{"relative log file", `{"name":"n","ipam":{"log_file_path":"cni.log"}}`, types.ErrInvalidNetworkConfig, "ipam.log_file_path"},
		{"unknown log level", `{"name":"n","ipam":{"log_level":"chatty"}}`, types.ErrInvalidNetworkConfig, "ipam.log_level"},
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
