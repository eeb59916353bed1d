package cni

// HandOff is a dependency's answer when it cannot serve a call the way nicpool-cni's
// own process would: ipamd, serving a call of the front, does not append to a host log
// file or reach another socket than its own. The call ends with it, before anything
// was asked of ipamd, and the front runs nicpool-cni for it (ipamd answers
// api.StatusHandBack).
type HandOff struct {
	// Kind is one of the HandOff* constants, for metrics.
	Kind   string
	Reason string
}

// Why a call of the front is handed off.
const (
	HandOffVersion = "version"  // VERSION or no verb: nicpool-cni answers them
	HandOffLogFile = "log_file" // the network names log_file_path
	HandOffSocket  = "socket"   // the network names another socket (or a refused one)
	HandOffSize    = "size"     // the call is over ipamd's bounds (api.MaxFrame, api.MaxConfig)
	HandOffOther   = "other"    // anything else
)

func (h *HandOff) Error() string { return "handed to nicpool-cni: " + h.Reason }
