package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nicpool/nicpool/ipamd/api"
)

// DefaultTimeout bounds one call to ipamd when the config does not say: the
// kubelet's default --runtime-request-timeout. The kubelet gives a pod's whole sandbox
// twice that, so an ADD that gave up sooner would only turn its wait in ipamd's line
// into a DEL, the kubelet's backoff and a new ADD at the back of the line; a stopped
// ipamd is seen at once all the same (its socket refuses the connection). The reasons
// in full are in docs/configuration.md.
const DefaultTimeout = 2 * time.Minute

// Config is the parsed network configuration, as the plugin uses it.
type Config struct {
	// CNIVersion is the version the result must be printed in.
	CNIVersion string
	// Network is the CNI network name.
	Network string
	// SocketPath is ipamd's unix socket (ipam_unix_socket_path), beneath RunDir; empty
	// when the configured path is refused.
	SocketPath string
	// DefaultIPv4Pools and DefaultIPv6Pools (default_ipv4_ippool, default_ipv6_ippool)
	// apply when neither the pod nor its namespace names pools.
	DefaultIPv4Pools []string
	DefaultIPv6Pools []string
	// CleanGateway (clean_gateway) asks for no default route unless the pod decides.
	CleanGateway bool
	// Timeout bounds each call to ipamd (request_timeout).
	Timeout time.Duration
	// LogFile is where the plugin logs (log_file_path), beneath LogDir; empty means
	// stderr (also when the configured path is refused).
	LogFile string
	// LogLevel is the least severe level logged (log_level).
	LogLevel slog.Level
	// Refused is the first key the plugin will not honour: a path outside its
	// directories, or a spiderpool feature nicpool does not have. ADD, CHECK, GC and
	// STATUS fail with it before touching any file; DEL, which must let a pod go, does
	// without the key.
	Refused *types.Error

	// prevRaw holds prevResult, the result of ADD, present for CHECK (and DEL from
	// 1.0.0 on), with the plugin type it was written for; it is decoded only by the
	// verbs that use it (PrevResult), so that DEL never fails on a prevResult it does
	// not need, and no verb pays for one it does not read.
	prevRaw               json.RawMessage
	prevType, prevVersion string
	// ValidAttachments is cni.dev/valid-attachments, present for GC;
	// HasValidAttachments tells an empty list (release everything) from a missing one.
	ValidAttachments    []types.GCAttachment
	HasValidAttachments bool
	// ipamType is the ipam section's type (nicpool, or spiderpool).
	ipamType string
}

// Trimmed is the configuration nicpool-cni sends ipamd for verb: the keys the verb
// reads, as this configuration says them, and nothing else (no log_file_path, no
// socket, no key the plugin ignores), so that ipamd, which parses at most
// api.MaxConfig of a tenant's document, runs the call as it would run the whole
// configuration. prevResult, for CHECK, is the result as parsed and written again
// (prev, from PrevResult), without what the result types do not hold.
func (c *Config) Trimmed(verb string, prev types.Result) (*api.Conf, error) {
	t := &api.Conf{CNIVersion: c.CNIVersion, Name: c.Network, IPAM: api.ConfIPAM{
		Type:           c.ipamType,
		RequestTimeout: c.Timeout.String(),
		LogLevel:       strings.ToLower(c.LogLevel.String()),
	}}
	if t.IPAM.Type == "" {
		t.IPAM.Type = Name
	}
	switch verb {
	case "ADD", "STATUS":
		t.IPAM.DefaultIPv4Pools, t.IPAM.DefaultIPv6Pools, t.IPAM.CleanGateway = c.DefaultIPv4Pools, c.DefaultIPv6Pools, c.CleanGateway
	case "CHECK":
		if prev != nil {
			raw, err := json.Marshal(prev)
			if err != nil {
				return nil, types.NewError(types.ErrDecodingFailure, "CHECK: prevResult: pass the result of ADD unchanged", err.Error())
			}
			t.Type, t.PrevResult = c.prevType, raw
		}
	case "GC":
		if c.HasValidAttachments {
			valid := make([]api.ConfAttachment, len(c.ValidAttachments))
			for i, a := range c.ValidAttachments {
				valid[i] = api.ConfAttachment{ContainerID: a.ContainerID, IfName: a.IfName}
			}
			t.ValidAttachments = &valid
		}
	}
	return t, nil
}

// NetworkConfig is what ipamd is told about the network.
func (c *Config) NetworkConfig() api.NetworkConfig {
	return api.NetworkConfig{
		Name:             c.Network,
		DefaultIPv4Pools: c.DefaultIPv4Pools,
		DefaultIPv6Pools: c.DefaultIPv6Pools,
		CleanGateway:     c.CleanGateway,
	}
}

// netConf is the stdin document: the keys of the CNI library's PluginConf, those the
// plugin does not use kept raw and type-checked only when present, and the ipam
// section, which is decoded key by key so that an error can name the key. (Decoding
// into PluginConf itself made encoding/json work out the fields of every type it
// holds, at every CNI call.)
type netConf struct {
	CNIVersion   string          `json:"cniVersion,omitempty"`
	Name         string          `json:"name,omitempty"`
	Type         string          `json:"type,omitempty"`
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	IPAM         json.RawMessage `json:"ipam"`
	DNS          json.RawMessage `json:"dns,omitempty"`
	PrevResult   json.RawMessage `json:"prevResult,omitempty"`
	// ValidAttachments is present for GC; LegacyAttachments is the key libcni also
	// sends for GC (CNI issue #1101).
	ValidAttachments  json.RawMessage `json:"cni.dev/valid-attachments,omitempty"`
	LegacyAttachments json.RawMessage `json:"cni.dev/attachments,omitempty"`
}

// present reports whether a raw member holds a value (null reads as absent).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// decodeMember decodes the raw member key into v; a value of the wrong type is an
// error naming the key (and the field inside it).
func decodeMember(key string, raw json.RawMessage, v any) *types.Error {
	if err := json.Unmarshal(raw, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field != "" {
				key += "." + typeErr.Field
			}
			return invalidConfig(key, fmt.Sprintf("a JSON %s is not allowed here: see the CNI specification for this key's type", typeErr.Value))
		}
		return types.NewError(types.ErrDecodingFailure,
			"network configuration is not valid JSON: fix the document the runtime passes on stdin", err.Error())
	}
	return nil
}

// ipamConf is the ipam section. Key names follow spiderpool's so that existing network
// configurations keep working when the type changes to nicpool.
type ipamConf struct {
	Type             string
	SocketPath       string
	DefaultIPv4Pools []string
	DefaultIPv6Pools []string
	CleanGateway     *bool
	Timeout          *time.Duration
	LogFile          string
	LogLevel         string
	// MatchMasterSubnet is spiderpool's match_master_subnet (pick the pool whose
	// subnet matches the SR-IOV master's), which nicpool does not implement.
	MatchMasterSubnet bool
}

// spiderpool's defaults for its socket and log paths. A network configuration written
// for spiderpool may spell them out; they name spiderpool's agent and log, which
// nicpool replaces, so they read as if the key were absent.
const (
	spiderpoolSocketPath = "/var/run/spidernet/spiderpool.sock"
	spiderpoolLogPath    = "/var/log/spidernet/spiderpool.log"
)

// decodeIPAM reads the keys nicpool knows and ignores the others (spiderpool's log
// rotation keys, keys of other tools), as CNI configs are shared documents.
func decodeIPAM(raw json.RawMessage) (*ipamConf, *types.Error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return nil, invalidConfig("ipam", `must be an object such as {"type": "nicpool"}`)
	}
	var c ipamConf
	str := func(key string, dst *string) *types.Error {
		if v, ok := keys[key]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return invalidConfig("ipam."+key, "must be a string")
			}
		}
		return nil
	}
	pools := func(key string, dst *[]string) *types.Error {
		v, ok := keys[key]
		if !ok {
			return nil
		}
		var one string
		if err := json.Unmarshal(v, &one); err == nil {
			*dst = []string{one}
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return invalidConfig("ipam."+key, `must be a list of SpiderIPPool names such as ["default-v4"]`)
		}
		return nil
	}
	for _, e := range []*types.Error{
		str("type", &c.Type),
		str("ipam_unix_socket_path", &c.SocketPath),
		str("log_file_path", &c.LogFile),
		str("log_level", &c.LogLevel),
		pools("default_ipv4_ippool", &c.DefaultIPv4Pools),
		pools("default_ipv6_ippool", &c.DefaultIPv6Pools),
	} {
		if e != nil {
			return nil, e
		}
	}
	if v, ok := keys["clean_gateway"]; ok {
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return nil, invalidConfig("ipam.clean_gateway", "must be true or false")
		}
		c.CleanGateway = &b
	}
	if v, ok := keys["match_master_subnet"]; ok {
		if err := json.Unmarshal(v, &c.MatchMasterSubnet); err != nil {
			return nil, invalidConfig("ipam.match_master_subnet", "must be true or false")
		}
	}
	if v, ok := keys["request_timeout"]; ok {
		d, err := parseTimeout(v)
		if err != nil {
			return nil, invalidConfig("ipam.request_timeout", err.Error())
		}
		c.Timeout = &d
	}
	return &c, nil
}

// ParseConfig reads the network configuration a runtime passes on stdin. Every error is
// a *types.Error whose message names the field and what to write instead.
func ParseConfig(stdin []byte) (*Config, error) {
	var n netConf
	if err := strictJSON(stdin, &n); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return nil, invalidConfig(typeErr.Field, fmt.Sprintf("a JSON %s is not allowed here: see the CNI specification for this key's type", typeErr.Value))
		}
		return nil, types.NewError(types.ErrDecodingFailure,
			"network configuration is not valid JSON: fix the document the runtime passes on stdin", err.Error())
	}
	// The keys no verb reads (capabilities, dns) and prevResult, which only CHECK
	// reads, are checked for their JSON type only and not decoded: a network
	// configuration is a tenant's document, and decoding what is not used would let it
	// cost whoever parses it (ipamd, for a call of the front) many times its size.
	for _, m := range []struct {
		key, kind string
		raw       json.RawMessage
	}{
		{"capabilities", "object", n.Capabilities},
		{"dns", "object", n.DNS},
		{"prevResult", "object", n.PrevResult},
	} {
		if present(m.raw) && jsonKind(m.raw) != m.kind {
			return nil, invalidConfig(m.key, fmt.Sprintf("a JSON %s is not allowed here: see the CNI specification for this key's type", jsonKind(m.raw)))
		}
	}
	var validAttachments, legacyAttachments []types.GCAttachment
	for _, m := range []struct {
		key string
		raw json.RawMessage
		v   any
	}{
		{"cni.dev/valid-attachments", n.ValidAttachments, &validAttachments},
		{"cni.dev/attachments", n.LegacyAttachments, &legacyAttachments},
	} {
		if present(m.raw) {
			if err := decodeMember(m.key, m.raw, m.v); err != nil {
				return nil, err
			}
		}
	}
	if !present(n.IPAM) {
		return nil, invalidConfig("ipam", `the network configuration has no "ipam" section: add "ipam": {"type": "nicpool"}`)
	}
	ipam, terr := decodeIPAM(n.IPAM)
	if terr != nil {
		return nil, terr
	}
	c := &Config{
		CNIVersion:       n.CNIVersion,
		Network:          n.Name,
		SocketPath:       api.DefaultSocketPath,
		DefaultIPv4Pools: ipam.DefaultIPv4Pools,
		DefaultIPv6Pools: ipam.DefaultIPv6Pools,
		Timeout:          DefaultTimeout,
		LogLevel:         slog.LevelInfo,
	}
	if c.CNIVersion == "" {
		// The spec's default for a config without a version.
		c.CNIVersion = "0.1.0"
	}
	if c.Network == "" {
		return nil, invalidConfig("name", `the network configuration has no "name": set it to the network's name`)
	}
	c.confine(ipam)
	for _, f := range []struct {
		name  string
		pools []string
	}{{"ipam.default_ipv4_ippool", c.DefaultIPv4Pools}, {"ipam.default_ipv6_ippool", c.DefaultIPv6Pools}} {
		for i, p := range f.pools {
			if strings.TrimSpace(p) == "" || strings.ContainsAny(p, " \t\r\n") {
				return nil, invalidConfig(fmt.Sprintf("%s[%d]", f.name, i), fmt.Sprintf("%q is not a pool name: list SpiderIPPool names such as \"default-v4\"", p))
			}
		}
	}
	if ipam.CleanGateway != nil {
		c.CleanGateway = *ipam.CleanGateway
	}
	if ipam.Timeout != nil {
		t := *ipam.Timeout
		if t < api.MinRequestTimeout || t > api.MaxRequestTimeout {
			return nil, invalidConfig("ipam.request_timeout", fmt.Sprintf("%s is out of range: give a duration between %s and %s, such as \"30s\"", t, api.MinRequestTimeout, api.MaxRequestTimeout))
		}
		c.Timeout = t
	}
	if ipam.LogLevel != "" {
		lvl, ok := parseLevel(ipam.LogLevel)
		if !ok {
			return nil, invalidConfig("ipam.log_level", fmt.Sprintf("%q is not a log level: use debug, info, warn or error", ipam.LogLevel))
		}
		c.LogLevel = lvl
	}
	if present(n.PrevResult) {
		c.prevRaw, c.prevType, c.prevVersion = n.PrevResult, n.Type, n.CNIVersion
	}
	c.ipamType = ipam.Type
	switch {
	case validAttachments != nil:
		c.ValidAttachments, c.HasValidAttachments = validAttachments, true
	case legacyAttachments != nil:
		c.ValidAttachments, c.HasValidAttachments = legacyAttachments, true
	}
	if c.HasValidAttachments {
		for i, a := range c.ValidAttachments {
			if a.ContainerID == "" || a.IfName == "" {
				return nil, invalidConfig(fmt.Sprintf("cni.dev/valid-attachments[%d]", i), "an attachment needs both containerID and ifname")
			}
		}
	}
	return c, nil
}

// confine takes the configured paths that are beneath the plugin's directories and
// records the first that is not, or a spiderpool feature nicpool lacks, as Refused.
func (c *Config) confine(ipam *ipamConf) {
	if p := ipam.SocketPath; p != "" && p != spiderpoolSocketPath {
		if _, ok := Beneath(RunDir, p); ok {
			c.SocketPath = filepath.Clean(p)
		} else {
			c.SocketPath = ""
			c.refuse(invalidConfig("ipam.ipam_unix_socket_path", fmt.Sprintf("%.200q is not beneath %s: nicpool's plugin connects only to ipamd's socket there; leave the key out (the default is %s)", p, RunDir, api.DefaultSocketPath)))
		}
	}
	if p := ipam.LogFile; p != "" && p != spiderpoolLogPath {
		rel, ok := Beneath(LogDir, p)
		switch {
		case !ok:
			c.refuse(invalidConfig("ipam.log_file_path", fmt.Sprintf("%.200q is not beneath %s: nicpool's plugin writes only there; give a path such as %s/cni.log, or leave the key out to log to stderr", p, LogDir, LogDir)))
		case !ShallowLogPath(rel):
			c.refuse(invalidConfig("ipam.log_file_path", fmt.Sprintf("%.200q is more than one directory beneath %s, or a name in it is longer than %d bytes: give a file in %s or in one subdirectory of it, such as %s/cni.log or %s/net1/cni.log", p, LogDir, MaxLogName, LogDir, LogDir, LogDir)))
		default:
			c.LogFile = filepath.Clean(p)
		}
	}
	if ipam.MatchMasterSubnet {
		c.refuse(invalidConfig("ipam.match_master_subnet", "nicpool does not pick pools by the subnet of the master interface: remove the key and name the pools in default_ipv4_ippool / default_ipv6_ippool or in the pod's ipam.spidernet.io/ippools annotation"))
	}
}

// refuse records the first key the plugin will not honour.
func (c *Config) refuse(e *types.Error) {
	if c.Refused == nil {
		c.Refused = e
	}
}

// PrevResult is prevResult parsed in the config's version; nil when there is none.
func (c *Config) PrevResult() (types.Result, error) {
	if c.prevRaw == nil {
		return nil, nil
	}
	var raw map[string]any
	if err := decodeMember("prevResult", c.prevRaw, &raw); err != nil {
		return nil, err
	}
	conf := &types.PluginConf{CNIVersion: c.prevVersion, Name: c.Network, Type: c.prevType, RawPrevResult: raw}
	if err := version.ParsePrevResult(conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("prevResult does not parse as a cniVersion %s result: pass the result of ADD unchanged", c.CNIVersion), err.Error())
	}
	return conf.PrevResult, nil
}

// jsonKind names the JSON type of a valid JSON value as encoding/json's errors do.
func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// strictJSON decodes one JSON document; trailing data is an error, as a truncated or
// concatenated config is a runtime bug better seen than half-read.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON document")
	}
	return nil
}

func invalidConfig(field, msg string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, field+": "+msg, "")
}

func parseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	}
	return 0, false
}

// parseTimeout accepts a Go duration string ("30s") or a number of seconds.
func parseTimeout(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: write one such as \"30s\"", s)
		}
		return d, nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil {
		return 0, fmt.Errorf("must be a duration such as \"30s\" or a number of seconds")
	}
	if secs > api.MaxRequestTimeout.Seconds() {
		// Out of range either way; saturate rather than overflow the conversion.
		secs = api.MaxRequestTimeout.Seconds() + 1
	}
	return time.Duration(secs * float64(time.Second)), nil
}
