package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/ipamd/api"
)

// Relay serves c as nicpool-cni does: with the same checks as Serve, then, for each
// verb, what the call needs of this process (the whole configuration parsed, whatever
// its size; log_file_path opened; the socket it names reached), and ipamd is sent the
// call as a frame (Send) whose stdin is the configuration trimmed to what the verb
// reads (Config.Trimmed). ipamd runs it as it runs the front's frames, and its answer
// is the call's: its stdout is printed on p.Stdout (a CNI error is returned, as
// Serve returns one), its log lines go where this process logs, and its exit code is
// the call's (an *Exit when neither 0 nor a CNI error's 1). DEL waits for an
// unreachable ipamd as docs/cni-plugin.md says. It returns what Serve does, or an
// *Exit.
func (p *Plugin) Relay(c *Call, about string) error {
	return serveKeeping[*Exit](newCNICall(c, p.Stdout, p.Stderr, p.NetNS), p.RelayFuncs(), about)
}

// RelayFuncs are p's CNI verbs as Relay runs them; none of them panics. A CNI error
// ipamd answered is returned as the *types.Error it printed.
func (p *Plugin) RelayFuncs() Funcs {
	r := func(verb string) func(*CmdArgs) error {
		return func(a *CmdArgs) error { return guard(verb, func() error { return p.relay(verb, a) }) }
	}
	return Funcs{Add: r("ADD"), Del: r("DEL"), Check: r("CHECK"), GC: r("GC"), Status: r("STATUS")}
}

// Exit is a call ipamd answered with an exit code other than 0: what it printed is
// printed already, and the process exits with Code.
type Exit struct{ Code int }

func (e *Exit) Error() string { return fmt.Sprintf("ipamd's answer exits %d", e.Code) }

func (p *Plugin) relay(verb string, args *CmdArgs) error {
	c, done, err := p.begin(verb, args)
	if err != nil {
		return err
	}
	defer done()
	log := c.log
	if pod, _ := ParseArgs(args.Args); pod.Pod.Name != "" {
		log = log.With("pod", pod.Pod.Namespace+"/"+pod.Pod.Name)
	}
	if c.conf.SocketPath == "" { // refused: only DEL comes this far without it
		log.Warn(notReleasedRefused)
		return nil
	}
	// What the verb checks of the call before asking ipamd anything, checked here as
	// ipamd would, so that the answer does not depend on ipamd being there.
	var prev types.Result
	switch verb {
	case "ADD":
		_, err = addPod(args)
	case "CHECK":
		prev, _, err = checkPrev(c.conf, args)
	case "GC":
		err = gcValid(c.conf)
	}
	if err != nil {
		return err
	}
	conf, err := c.conf.Trimmed(verb, prev)
	if err != nil {
		return err
	}
	stdin, err := json.Marshal(conf)
	if err != nil {
		return types.NewError(types.ErrInternal, verb+": nicpool plugin bug: the trimmed configuration does not encode: report it", err.Error())
	}
	if len(stdin) > api.MaxConfig {
		if verb == "DEL" {
			log.Warn(notReleasedDeclined, "reason", fmt.Sprintf("what DEL reads of the configuration is %d bytes, over ipamd's bound of %d", len(stdin), api.MaxConfig))
			return nil
		}
		return invalidConfig("name, ipam.default_ipv4_ippool, ipam.default_ipv6_ippool, prevResult, cni.dev/valid-attachments",
			fmt.Sprintf("%s reads %d bytes of these keys, over ipamd's bound of %d bytes: name fewer default pools, and keep the network's name short", verb, len(stdin), api.MaxConfig))
	}
	relation := ""
	if p.NetNS != nil && args.Netns != "" {
		relation = p.NetNS(args.Netns)
	}
	f := &api.Frame{Name: p.Name, PID: p.PID, NetNS: relation, Stdin: stdin, Env: map[string]string{
		"CNI_COMMAND": verb, "CNI_CONTAINERID": args.ContainerID, "CNI_NETNS": args.Netns, "CNI_IFNAME": args.IfName,
		"CNI_ARGS": args.Args, "CNI_PATH": args.Path, "CNI_NETNS_OVERRIDE": args.NetnsOverride,
	}}
	if f.Name == "" {
		f.Name = Name
	}
	if err := frameFits(f); err != nil {
		if verb == "DEL" {
			log.Warn(notReleasedDeclined, "reason", err.Error())
			return nil
		}
		return err
	}
	var a *api.Answer
	if verb == "DEL" {
		a, err = c.sendWaiting(p, f)
	} else {
		a, err = p.Send(c.ctx, c.conf.SocketPath, f)
	}
	var handBack *api.HandBack
	var refused *RefusedPath
	switch {
	case err == nil:
	case verb == "DEL" && errors.As(err, &handBack):
		log.Warn(notReleasedDeclined, "reason", handBack.Reason)
		return nil
	case verb == "DEL" && errors.Is(err, api.ErrUnreachable):
		// The pod goes without ipamd: its addresses stay recorded until the garbage
		// collector sees the pod deleted (a StatefulSet pod that returns keeps them).
		log.Warn(notReleasedUnreachable, "error", err.Error())
		return nil
	case errors.As(err, &handBack):
		log.Error(verb+" declined by ipamd", "reason", handBack.Reason)
		e := types.NewError(types.ErrTryAgainLater, fmt.Sprintf("%s: ipamd declined the call (%s): this is a bug in nicpool, report it with ipamd's log", verb, handBack.Reason), "")
		if verb == "STATUS" {
			return statusError(e)
		}
		return e
	case errors.As(err, &refused):
		return fromIPAMD(verb, c.conf.SocketPath, err)
	default:
		log.Error(verb+" failed", "error", err)
		e := fromIPAMD(verb, c.conf.SocketPath, err)
		if verb == "STATUS" {
			return statusError(e)
		}
		return e
	}
	// ipamd's log lines of the call, where this process logs.
	_, _ = c.logw.Write(a.Stderr)
	if a.Exit == 1 {
		// A CNI error, which the caller prints as ipamd did (PrintError).
		var e types.Error
		if json.Unmarshal(a.Stdout, &e) == nil && e.Msg != "" {
			return &e
		}
	}
	if _, err := p.Stdout.Write(a.Stdout); err != nil {
		return types.NewError(types.ErrIOFailure, "write ipamd's answer to stdout", err.Error())
	}
	if a.Exit != 0 {
		return &Exit{Code: a.Exit}
	}
	return nil
}

// frameFits refuses a frame ipamd would not read (over api.MaxFrame), naming the
// runtime's largest CNI_* variable: the configuration is trimmed already, so the
// rest of the frame is what the container runtime passed.
func frameFits(f *api.Frame) error {
	size := len(api.AppendFrame(nil, f))
	if size <= api.MaxFrame {
		return nil
	}
	largest := api.FrameEnv[0]
	for _, name := range api.FrameEnv {
		if len(f.Env[name]) > len(f.Env[largest]) {
			largest = name
		}
	}
	return types.NewError(types.ErrInvalidEnvironmentVariables,
		fmt.Sprintf("%s is %d bytes: the call is %d bytes, over ipamd's bound of %d", largest, len(f.Env[largest]), size, api.MaxFrame),
		fmt.Sprintf("the container runtime passed more than nicpool serves: each CNI_* variable should stay under %d bytes", api.MaxValue))
}

// sendWaiting sends DEL's frame, trying again while ipamd is unreachable, for up to
// DelWait (or the request timeout when shorter) in all: an ipamd that accepts and
// does not answer (stopped, deadlocked) is unreachable once that wait is over, so
// that DEL ends within the kubelet's bound whatever request_timeout says.
func (c *call) sendWaiting(p *Plugin, f *api.Frame) (*api.Answer, error) {
	deadline := c.clock.Now().Add(min(DelWait, c.conf.Timeout))
	ctx, cancel := context.WithDeadline(c.ctx, deadline)
	defer cancel()
	for {
		a, err := p.Send(ctx, c.conf.SocketPath, f)
		var refused *RefusedPath
		if !errors.Is(err, api.ErrUnreachable) || errors.As(err, &refused) || time.Until(deadline) < delRetryInterval {
			return a, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-c.clock.After(delRetryInterval):
		}
	}
}
