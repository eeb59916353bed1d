package cniplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/nicpool/nicpool/ipamd/api"
)

// The front (cniplugin/front/nicpool.c, installed as nicpool and spiderpool) forwards
// a CNI call to ipamd instead of running this package in a process of its own: its
// frame holds, as netstrings ("<length>:<bytes>,"), what the plugin would have read.
// ipamd runs the call with ServeForwarded and answers what the plugin would have
// printed and its exit code. A call it cannot run the same way is handed back: the
// front then runs nicpool-cni, this package's own binary, for it.

// forwardedFields is the number of netstrings in a frame: the name the front was
// executed as, its pid, the CNI_* variables in cniEnv's order, how CNI_NETNS relates to
// the front's network namespace, and stdin.
var forwardedFields = 2 + len(cniEnv) + 2

// Forwarded is one CNI call as the front forwarded it.
type Forwarded struct {
	// Name is what the front was executed as (the base of its argv[0]).
	Name string
	// PID is the front's process, for the logs.
	PID int
	// Env holds the CNI_* variables; unset ones are empty.
	Env map[string]string
	// NetNS is how CNI_NETNS relates to the front's own network namespace.
	NetNS string
	// Stdin is the network configuration.
	Stdin []byte
}

// DecodeForwarded reads a frame of the front.
func DecodeForwarded(b []byte) (*Forwarded, error) {
	fields := make([][]byte, 0, forwardedFields)
	for len(b) > 0 {
		colon := bytes.IndexByte(b, ':')
		if colon <= 0 || colon > 10 {
			return nil, errors.New("a field has no length")
		}
		n := 0
		for _, d := range b[:colon] {
			if d < '0' || d > '9' {
				return nil, fmt.Errorf("field %d's length %q is not a number", len(fields), b[:colon])
			}
			n = n*10 + int(d-'0')
		}
		rest := b[colon+1:]
		if n >= len(rest) || rest[n] != ',' {
			return nil, fmt.Errorf("field %d is cut short", len(fields))
		}
		fields = append(fields, rest[:n])
		b = rest[n+1:]
	}
	if len(fields) != forwardedFields {
		return nil, fmt.Errorf("%d fields, want %d", len(fields), forwardedFields)
	}
	pid, err := strconv.Atoi(string(fields[1]))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("pid %q is not a process", fields[1])
	}
	f := &Forwarded{Name: string(fields[0]), PID: pid, Env: make(map[string]string, len(cniEnv))}
	for i, v := range cniEnv {
		f.Env[v.name] = string(fields[2+i])
	}
	f.NetNS = string(fields[2+len(cniEnv)])
	switch f.NetNS {
	case "", netnsSame, netnsOther, netnsNoSelf:
	default:
		return nil, fmt.Errorf("netns relation %q is none of %s, %s, %s", f.NetNS, netnsSame, netnsOther, netnsNoSelf)
	}
	f.Stdin = fields[3+len(cniEnv)]
	return f, nil
}

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
func ServeForwarded(ctx context.Context, f *Forwarded, ipamd IPAMD) (*Answer, *HandOff) {
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
