package api

import (
	"encoding/json"
	"time"
)

// MinRequestTimeout and MaxRequestTimeout bound ipam.request_timeout: the plugin
// refuses a configuration outside them, and Client clamps its calls' into them.
// Runtimes give a whole ADD a few minutes, and a plugin that outlives its runtime call
// only leaks work.
const (
	MinRequestTimeout = time.Second
	MaxRequestTimeout = 5 * time.Minute
)

// Conf is a network configuration as nicpool's Go callers write it into a frame's
// stdin: only the keys ipamd's verbs read, under the plugin's key names
// (cniplugin/cni parses them; TestTrimmedConfigParsesAsTheOriginal holds the two to
// each other). nicpool-cni sends it in place of a configuration ipamd would not take
// (over MaxConfig, or naming log_file_path or another socket), and Client builds one
// from a verb's request.
type Conf struct {
	CNIVersion string   `json:"cniVersion"`
	Name       string   `json:"name"`
	Type       string   `json:"type,omitempty"`
	IPAM       ConfIPAM `json:"ipam"`
	// PrevResult is the result of ADD, for CHECK.
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
	// ValidAttachments is cni.dev/valid-attachments, for GC (nil: none sent).
	ValidAttachments *[]ConfAttachment `json:"cni.dev/valid-attachments,omitempty"`
}

// ConfIPAM is Conf's ipam section.
type ConfIPAM struct {
	Type             string   `json:"type"`
	DefaultIPv4Pools []string `json:"default_ipv4_ippool,omitempty"`
	DefaultIPv6Pools []string `json:"default_ipv6_ippool,omitempty"`
	CleanGateway     bool     `json:"clean_gateway,omitempty"`
	// RequestTimeout is a Go duration ("2m0s"); empty: the plugin's default.
	RequestTimeout string `json:"request_timeout,omitempty"`
	LogLevel       string `json:"log_level,omitempty"`
}

// ConfAttachment is one entry of cni.dev/valid-attachments.
type ConfAttachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}
