// Package api is the contract between the CNI plugin and ipamd: one protocol, a CNI
// call carried whole in a frame (frame.go) over HTTP on ipamd's unix socket, answered
// with what the plugin prints; the types of ipamd's verbs, which the plugin's library
// (cniplugin/cni) asks ipamd's service for when ipamd runs it on a frame; and a small
// client (client.go). It imports nothing heavier than net, so the plugin binary stays
// small and starts fast.
//
//	POST /v1/cni   a Frame: one CNI call (CNI_* variables, stdin, the caller's name,
//	               pid and netns relation)
//	               → 200, the plugin's stdout and stderr, HeaderExit and HeaderStdout;
//	                 StatusHandBack (421) when ipamd does not run the call
//	GET  /healthz  → 200 "ok"
//
// Three callers send frames: the front (cniplugin/front/nicpool.c) the call as the
// runtime made it; nicpool-cni, for a call the front handed it or ipamd handed back,
// the call with a configuration of only the keys the verb reads (Conf), once it has
// done itself what ipamd does not (open log_file_path, parse a configuration over
// MaxConfig, reach another socket); and Client's verbs, for nicpool's tools and tests.
// ipamd answers a call whose turn did not come within the configuration's
// request_timeout with CNI code 11 (try again later), before its caller gives up, and
// does nothing for it.
package api

// DefaultSocketPath is where ipamd listens unless configured otherwise.
const DefaultSocketPath = "/run/nicpool/ipamd.sock"

// Endpoint paths.
const (
	PathCNI     = "/v1/cni"
	PathHealthz = "/healthz"
)

// The headers of PathCNI's answer: the plugin's exit code, and how many bytes of the
// body are its stdout (the rest is its stderr). cniplugin/front/nicpool.c reads them.
const (
	HeaderExit   = "Nicpool-Exit"
	HeaderStdout = "Nicpool-Stdout"
)

// What one request on the socket may carry. A network configuration is a tenant's
// document and ipamd a long-lived daemon every pod of the node depends on: ipamd
// reads at most these bounds, and a call of the front over them is handed back to
// nicpool-cni, whose own short-lived process then pays for it.
const (
	// MaxConfig bounds the network configuration (the CNI call's stdin) ipamd parses.
	MaxConfig = 64 << 10
	// MaxValue bounds one CNI_* variable of a call of the front.
	MaxValue = 16 << 10
	// MaxCall bounds what one CNI call carries: its configuration and its CNI_*
	// variables.
	MaxCall = MaxConfig + len(FrameEnv)*MaxValue
	// MaxFrame bounds the body of a POST to PathCNI: MaxCall, and room for the
	// front's name, pid, netns relation and the netstrings' lengths.
	MaxFrame = MaxCall + 4096
)

// Pod identifies the pod of a CNI call, from CNI_ARGS.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is K8S_POD_UID. Runtimes that do not pass it leave it empty; ipamd then uses
	// the UID of the pod in its cache.
	UID string `json:"uid,omitempty"`
}

// Attachment is one interface of one container, the unit CNI works in.
type Attachment struct {
	ContainerID string `json:"containerID"`
	Interface   string `json:"interface"`
}

// NetworkConfig is what the CNI network configuration says about IPAM.
type NetworkConfig struct {
	// Name is the CNI network name (the NetworkAttachmentDefinition's config name).
	Name string `json:"name"`
	// DefaultIPv4Pools and DefaultIPv6Pools are used when neither the pod nor its
	// namespace names pools (default_ipv4_ippool / default_ipv6_ippool).
	DefaultIPv4Pools []string `json:"defaultIPv4Pools,omitempty"`
	DefaultIPv6Pools []string `json:"defaultIPv6Pools,omitempty"`
	// CleanGateway drops the default route unless the pod's selection decides.
	CleanGateway bool `json:"cleanGateway,omitempty"`
}

// The verbs' requests and answers below are what the plugin's library asks ipamd's
// service (cniplugin/cni's IPAMD) when ipamd runs it on a frame: in-process types,
// never on the socket.

// AllocateRequest asks for the addresses of one (pod, interface).
type AllocateRequest struct {
	Attachment
	NetNS   string        `json:"netns,omitempty"`
	Pod     Pod           `json:"pod"`
	Network NetworkConfig `json:"network"`
}

// IPConfig is one address handed to an interface.
type IPConfig struct {
	// Address in CIDR form, prefix length of the pool's subnet: "10.6.0.7/16".
	Address string `json:"address"`
	// Gateway is the pool's gateway; empty when the pool has none or clean gateway applies.
	Gateway string `json:"gateway,omitempty"`
	// Pool is the SpiderIPPool the address came from.
	Pool string `json:"pool"`
}

// Route is one route for the interface.
type Route struct {
	Dst string `json:"dst"`
	Gw  string `json:"gw,omitempty"`
}

// AllocateResponse is the interface's addresses and routes. A repeated request for the
// same (pod UID, interface) returns the same addresses.
type AllocateResponse struct {
	Interface string     `json:"interface"`
	IPs       []IPConfig `json:"ips"`
	Routes    []Route    `json:"routes,omitempty"`
	// CleanGateway is true when no default route should be installed.
	CleanGateway bool `json:"cleanGateway,omitempty"`
}

// ReleaseRequest releases the addresses of one (pod, interface). Releasing what is not
// allocated succeeds.
type ReleaseRequest struct {
	Attachment
	Pod     Pod           `json:"pod"`
	Network NetworkConfig `json:"network"`
}

// ReleaseResponse lists what was released, and whether the addresses were kept for a
// StatefulSet pod that will come back.
type ReleaseResponse struct {
	Released []string `json:"released,omitempty"`
	Kept     []string `json:"kept,omitempty"`
}

// CheckRequest asks whether the reservation of one (pod, interface) still stands.
type CheckRequest struct {
	Attachment
	Pod     Pod           `json:"pod"`
	Network NetworkConfig `json:"network"`
}

// CheckResponse is the current reservation; the plugin compares it with prevResult.
type CheckResponse struct {
	IPs []IPConfig `json:"ips"`
}

// GCRequest releases every reservation of the network on this node that is not one of
// ValidAttachments (cni.dev/valid-attachments).
type GCRequest struct {
	Network          NetworkConfig `json:"network"`
	ValidAttachments []Attachment  `json:"validAttachments"`
}

// GCResponse lists the released addresses.
type GCResponse struct {
	Released []string `json:"released,omitempty"`
}

// StatusRequest asks whether ipamd can serve ADD for this network.
type StatusRequest struct {
	Network NetworkConfig `json:"network"`
}

// StatusResponse says whether ADD can succeed; Ready is false when every pool the
// network can use is exhausted, with Message saying which.
type StatusResponse struct {
	Ready   bool   `json:"ready"`
	Message string `json:"message,omitempty"`
}

// CNI error codes ipamd answers with (CNI spec, "Error" section, and nicpool's own
// codes above 100 for the plugin's log).
const (
	CodeTryAgainLater    = 11  // ipamd starting, caches not synced, API server unreachable
	CodeInvalidConfig    = 7   // bad network config or pod annotation
	CodeDecodingFailure  = 6   // undecodable request
	CodeInternal         = 999 // a bug: report it
	CodeUnknownContainer = 3   // unknown pod or container (DEL treats it as success)
	CodeNotAvailable     = 50  // STATUS: plugin not available
	CodePoolExhausted    = 101 // no free address in the selected pools
	CodeNoPool           = 102 // no pool selected or usable for this interface
)

// Error is a verb's failure, with the CNI code the plugin answers; it has the JSON
// shape of a CNI error.
type Error struct {
	Code    uint   `json:"code"`
	Message string `json:"msg"`
	Details string `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Details == "" {
		return e.Message
	}
	return e.Message + ": " + e.Details
}
