package cniplugin

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/nicpool/nicpool/ipamd/api"
)

// The front (cniplugin/front/nicpool.c, installed as nicpool and spiderpool) forwards
// a CNI call to ipamd instead of running this package in a process of its own: its
// frame (api.Frame) holds what the plugin would have read.
// ipamd runs the call with ServeForwarded and answers what the plugin would have
// printed and its exit code. A call it cannot run the same way is handed back: the
// front then runs nicpool-cni, this package's own binary, for it.

// Answer is what the plugin would have printed, and its exit code.
type Answer struct {
	Exit           int
	Stdout, Stderr []byte
}

// HandOff says why ipamd does not run a forwarded call: the front runs nicpool-cni.
type HandOff struct {
	// Kind is one of the HandOff* constants, for metrics.
	Kind   string
	Reason string
}

// Why a forwarded call is handed off.
const (
	HandOffVersion = "version"  // VERSION or no verb: nicpool-cni answers them
	HandOffLogFile = "log_file" // the network names log_file_path
	HandOffSocket  = "socket"   // the network names another socket (or a refused one)
	HandOffSize    = "size"     // the call is over ipamd's bounds (api.MaxFrame, api.MaxConfig)
	HandOffOther   = "other"    // anything else
)

func (h *HandOff) Error() string { return "handed to nicpool-cni: " + h.Reason }

// errHandOff ends a verb that ipamd must hand back (the reason is in inIPAMD).
var errHandOff = errors.New("handed off")

// inIPAMD is what a Plugin run by ipamd uses instead of a process of its own.
type inIPAMD struct {
	ipamd  IPAMD
	ctx    context.Context
	stderr io.Writer
	pid    int
	// handOff is why the call must be run by nicpool-cni, once begin finds it.
	handOff *HandOff
}

// handOffReason says why ipamd cannot run a call of this configuration as the plugin
// would: its log is a host file the plugin appends to, or it names a socket other than
// the one the front reached.
func handOffReason(c *Config) *HandOff {
	if c.LogFile != "" {
		return &HandOff{Kind: HandOffLogFile, Reason: "the network configuration names log_file_path, which the plugin writes itself"}
	}
	if rel, ok := beneath(RunDir, c.SocketPath); !ok || RunDir+"/"+rel != api.DefaultSocketPath {
		return &HandOff{Kind: HandOffSocket, Reason: "the network configuration names a socket other than " + api.DefaultSocketPath}
	}
	return nil
}

// ServeForwarded runs a forwarded call with ipamd as the plugin's ipamd, within ctx.
// It answers exactly what the plugin would have, or hands the call back.
func ServeForwarded(ctx context.Context, f *api.Frame, ipamd IPAMD) (*Answer, *HandOff) {
	switch f.Env["CNI_COMMAND"] {
	case "", "VERSION":
		return nil, &HandOff{Kind: HandOffVersion, Reason: "nicpool-cni answers VERSION and its own usage"}
	}
	var stdout, stderr bytes.Buffer
	in := &inIPAMD{ipamd: ipamd, ctx: ctx, stderr: &stderr, pid: f.PID}
	p := &Plugin{Stdout: &stdout, Name: installedName(f.Name), in: in}
	call := &cniCall{
		getenv:    func(name string) string { return f.Env[name] },
		stdinData: f.Stdin,
		stdout:    &stdout,
		stderr:    &stderr,
		netns:     func(string) string { return f.NetNS },
	}
	if call.stdinData == nil {
		call.stdinData = []byte{}
	}
	// From here the call holds the only reference to the configuration, which it
	// drops once parsed, before waiting for its turn (Plugin.begin).
	f.Stdin = nil
	e := call.serve(p.Funcs(), SupportedVersions, "")
	if in.handOff != nil {
		return nil, in.handOff
	}
	a := &Answer{}
	if e != nil {
		a.Exit = 1
		if err := printError(&stdout, e); err != nil {
			return nil, &HandOff{Kind: HandOffOther, Reason: "the error could not be printed: " + err.Error()}
		}
	}
	a.Stdout, a.Stderr = stdout.Bytes(), stderr.Bytes()
	return a, nil
}
