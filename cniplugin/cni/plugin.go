package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nicpool/nicpool/ipamd/api"
)

// SupportedVersions are the CNI spec versions the plugin speaks (0.3.0 for networks
// written for spiderpool, which speaks it).
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// The names the binary is installed under: its own, and spiderpool's, so that networks
// written for spiderpool (and the DELs runtimes cached for their pods) reach nicpool.
const (
	Name           = "nicpool"
	NameSpiderpool = "spiderpool"
)

// DelWait is how long DEL keeps trying an unreachable ipamd (no socket, connection
// refused or dropped, no answer) before it succeeds without it. It covers an ipamd
// container restart; past it, a pod being deleted must not hang in Terminating for a
// node daemon that is being rolled out or uninstalled, and the garbage collector
// releases the addresses of deleted pods.
const DelWait = 5 * time.Second

// delRetryInterval is the pause between DEL's attempts while ipamd is unreachable.
const delRetryInterval = 200 * time.Millisecond

// Plugin serves the CNI verbs of one call. Everything it needs from where it runs is
// one of its fields, so that the same code takes a call in nicpool-cni's own process
// (cniplugin.Process fills them from the process: os.Stdout, a log file opened
// following no symlink, ipamd's socket) and inside ipamd for a frame (ipamd/server
// fills them from the frame: buffers it answers, ipamd's own service). ipamd answers
// the call with its service (Serve, IPAMD); nicpool-cni does what the call needs of
// its process and sends ipamd the rest as a frame (Relay, Send), so that every call
// reaches ipamd the one way. A dependency that cannot serve a call the way the
// plugin's own process would answers a *HandOff, and the call ends with it.
type Plugin struct {
	// Stdout receives the result of ADD and the answer to VERSION; Stderr the usage,
	// and the log of a network without log_file_path.
	Stdout, Stderr io.Writer
	// Name is what the plugin was installed as (Name or NameSpiderpool), and PID the
	// process the runtime started for the call, for the logs.
	Name string
	PID  int
	// Context bounds every call to ipamd (nil: none but the request timeout).
	Context context.Context
	// Clock is what DEL waits with while ipamd is unreachable (nil: the system's).
	Clock Clock
	// OpenLog opens log_file_path for appending: rel is the file's path beneath
	// LogDir, within the bounds of ShallowLogPath. A *RefusedPath refuses the key;
	// another error logs to Stderr instead.
	OpenLog func(rel string) (io.WriteCloser, error)
	// IPAMD is ipamd's service for a call Serve answers, reached at socket, the
	// configuration's ipam_unix_socket_path (ipamd hands off any other than its own,
	// an empty one included). Each call is bounded by its context.
	IPAMD func(socket string) (IPAMD, error)
	// Send carries a call Relay sends to ipamd at socket, the configuration's
	// ipam_unix_socket_path, as a frame within ctx, and returns ipamd's answer: an
	// error wrapping api.ErrUnreachable when the whole answer did not come, an
	// *api.HandBack when ipamd declined the call.
	Send func(ctx context.Context, socket string, f *api.Frame) (*api.Answer, error)
	// NetNS tells how CNI_NETNS relates to the plugin's own network namespace: one
	// of api.NetNSSame, api.NetNSOther, api.NetNSNoSelf, or "" for no path. ADD and
	// DEL fail when it is the same (CNI_NETNS_OVERRIDE aside), as skel's do.
	NetNS func(path string) string
}

// IPAMD is what the plugin asks for addresses when it answers a call: ipamd's own
// service, when ipamd serves a frame.
type IPAMD interface {
	Allocate(context.Context, *api.AllocateRequest) (*api.AllocateResponse, error)
	Release(context.Context, *api.ReleaseRequest) (*api.ReleaseResponse, error)
	Check(context.Context, *api.CheckRequest) (*api.CheckResponse, error)
	GC(context.Context, *api.GCRequest) (*api.GCResponse, error)
	Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error)
}

// Clock tells the time and waits.
type Clock interface {
	Now() time.Time
	After(time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (p *Plugin) clock() Clock {
	if p.Clock == nil {
		return systemClock{}
	}
	return p.Clock
}

// InstalledName is the plugin's name for what its process was executed as (argv[0]):
// NameSpiderpool for the copy installed as spiderpool, else Name.
func InstalledName(arg0 string) string {
	if filepath.Base(arg0) == NameSpiderpool {
		return NameSpiderpool
	}
	return Name
}

// Funcs are p's CNI verbs; none of them panics.
func (p *Plugin) Funcs() Funcs {
	return Funcs{
		Add:    func(a *CmdArgs) error { return guard("ADD", func() error { return p.Add(a) }) },
		Del:    func(a *CmdArgs) error { return guard("DEL", func() error { return p.Del(a) }) },
		Check:  func(a *CmdArgs) error { return guard("CHECK", func() error { return p.Check(a) }) },
		GC:     func(a *CmdArgs) error { return guard("GC", func() error { return p.GC(a) }) },
		Status: func(a *CmdArgs) error { return guard("STATUS", func() error { return p.Status(a) }) },
	}
}

// call is what every verb starts from: the parsed config, a client for ipamd, a
// context bounded by the request timeout and a logger.
type call struct {
	conf   *Config
	client IPAMD
	ctx    context.Context
	log    *slog.Logger
	// logw is where log writes: stderr or the log file.
	logw  io.Writer
	clock Clock
}

// begin refuses, before touching any file, a configuration with a key the plugin will
// not honour; except for DEL, which logs the refusal and goes on without the key.
func (p *Plugin) begin(verb string, args *CmdArgs) (*call, func(), error) {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return nil, nil, err
	}
	// What the verb does not read goes now, before the call waits for its turn in
	// ipamd: the configuration's raw document, and prevResult but for CHECK.
	args.StdinData = nil
	if verb != "CHECK" {
		conf.prevRaw = nil
	}
	lenient := verb == "DEL"
	if conf.Refused != nil && !lenient {
		return nil, nil, conf.Refused
	}
	name := p.Name
	if name == "" {
		name = Name
	}
	log, logw, closeLog, err := p.openLog(conf, name)
	var refusedLog *types.Error
	if errors.As(err, &refusedLog) && lenient {
		err = nil
	}
	if err != nil {
		return nil, nil, err
	}
	var client IPAMD
	if p.IPAMD != nil {
		if client, err = p.IPAMD(conf.SocketPath); err != nil {
			closeLog()
			return nil, nil, err
		}
	}
	log = log.With("verb", verb, "network", conf.Network)
	if args.ContainerID != "" {
		log = log.With("container", args.ContainerID, "interface", args.IfName)
	}
	for _, r := range []*types.Error{conf.Refused, refusedLog} {
		if r != nil {
			log.Warn("going on without a refused key", "refused", r.Msg)
		}
	}
	base := p.Context
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithTimeout(base, conf.Timeout)
	c := &call{conf: conf, client: client, ctx: ctx, log: log, logw: logw, clock: p.clock()}
	return c, func() { cancel(); closeLog() }, nil
}

// attachment names the interface: CNI_CONTAINERID, which GC's valid attachments use,
// or the pod's infra container when a runtime leaves it out.
func attachment(args *CmdArgs, pod PodArgs) api.Attachment {
	id := args.ContainerID
	if id == "" {
		id = pod.InfraContainerID
	}
	return api.Attachment{ContainerID: id, Interface: args.IfName}
}

// Add allocates the interface's addresses and prints them as a result.
func (p *Plugin) Add(args *CmdArgs) error {
	c, done, err := p.begin("ADD", args)
	if err != nil {
		return err
	}
	defer done()
	pod, err := addPod(args)
	if err != nil {
		return err
	}
	log := c.log.With("pod", pod.Pod.Namespace+"/"+pod.Pod.Name)
	resp, err := c.client.Allocate(c.ctx, &api.AllocateRequest{
		Attachment: attachment(args, pod),
		NetNS:      args.Netns,
		Pod:        pod.Pod,
		Network:    c.conf.NetworkConfig(),
	})
	if err != nil {
		log.Error("allocate failed", "error", err)
		return fromIPAMD("ADD", c.conf.SocketPath, err)
	}
	if resp.Interface != "" && resp.Interface != args.IfName {
		return types.NewError(types.ErrInternal,
			fmt.Sprintf("ADD: ipamd answered for interface %q, not %q: this is a bug in ipamd, report it", resp.Interface, args.IfName), "")
	}
	if len(resp.IPs) == 0 {
		return types.NewError(api.CodeNoPool,
			fmt.Sprintf("ADD: ipamd allocated no address for interface %s: select a pool for it in the pod's ipam.spidernet.io/ippools annotation or set default_ipv4_ippool in the network configuration", args.IfName), "")
	}
	result, err := BuildResult(resp)
	if err != nil {
		return types.NewError(types.ErrInternal, "ADD: ipamd's answer is not a usable result: this is a bug in ipamd, report it", err.Error())
	}
	for _, ip := range resp.IPs {
		log.Info("allocated", "address", ip.Address, "pool", ip.Pool, "cleanGateway", resp.CleanGateway)
	}
	return Print(p.Stdout, result, c.conf.CNIVersion)
}

// addPod is the pod an ADD is for, from CNI_ARGS.
func addPod(args *CmdArgs) (PodArgs, error) {
	pod, err := ParseArgs(args.Args)
	if err == nil {
		err = pod.requirePod()
	}
	if err != nil {
		return pod, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	return pod, nil
}

// Del releases the interface's addresses; what ipamd does not know is released.
func (p *Plugin) Del(args *CmdArgs) error {
	c, done, err := p.begin("DEL", args)
	if err != nil {
		return err
	}
	defer done()
	// DEL must finish even for a sandbox whose arguments are incomplete: without the
	// pod's name ipamd finds no reservation and answers that nothing was released; the
	// garbage collector releases the addresses once the pod is gone.
	pod, _ := ParseArgs(args.Args)
	log := c.log
	if pod.Pod.Name != "" {
		log = log.With("pod", pod.Pod.Namespace+"/"+pod.Pod.Name)
	}
	resp, err := c.client.Release(c.ctx, &api.ReleaseRequest{
		Attachment: attachment(args, pod),
		Pod:        pod.Pod,
		Network:    c.conf.NetworkConfig(),
	})
	if err != nil {
		log.Error("release failed", "error", err)
		return fromIPAMD("DEL", c.conf.SocketPath, err)
	}
	log.Info("released", "released", resp.Released, "kept", resp.Kept)
	return nil
}

// What DEL logs when it lets a pod go without ipamd's release.
const (
	notReleasedRefused     = "not released: ipam_unix_socket_path is refused; the garbage collector releases the addresses once the pod is deleted"
	notReleasedUnreachable = "not released: ipamd is unreachable; the garbage collector releases the addresses once the pod is deleted"
	notReleasedDeclined    = "not released: ipamd declined the call; the garbage collector releases the addresses once the pod is deleted"
)

// Check fails unless ipamd holds exactly the addresses of prevResult.
func (p *Plugin) Check(args *CmdArgs) error {
	c, done, err := p.begin("CHECK", args)
	if err != nil {
		return err
	}
	defer done()
	_, want, err := checkPrev(c.conf, args)
	if err != nil {
		return err
	}
	pod, _ := ParseArgs(args.Args)
	resp, err := c.client.Check(c.ctx, &api.CheckRequest{
		Attachment: attachment(args, pod),
		Pod:        pod.Pod,
		Network:    c.conf.NetworkConfig(),
	})
	var e *api.Error
	if errors.As(err, &e) && e.Code == api.CodeUnknownContainer {
		return reservationMissing(args, want, e.Error())
	}
	if err != nil {
		return fromIPAMD("CHECK", c.conf.SocketPath, err)
	}
	have, err := ReservationFromIPAMD(resp.IPs)
	if err != nil {
		return types.NewError(types.ErrInternal, "CHECK: ipamd's answer is not a usable reservation: this is a bug in ipamd, report it", err.Error())
	}
	if len(have) == 0 {
		return reservationMissing(args, want, "ipamd holds no address for it")
	}
	if !have.Equal(want) {
		c.log.Info("reservation differs", "want", want.String(), "have", have.String())
		return types.NewError(CodeReservationDiffers,
			fmt.Sprintf("CHECK: interface %s of container %s holds %s in ipamd but the runtime configured %s: delete and re-create the pod sandbox", args.IfName, args.ContainerID, have, want), "")
	}
	return nil
}

// checkPrev is what CHECK compares ipamd's reservation with: prevResult, and the
// interface's addresses in it.
func checkPrev(conf *Config, args *CmdArgs) (types.Result, Reservation, error) {
	prev, err := conf.PrevResult()
	if err != nil {
		return nil, nil, err
	}
	if prev == nil {
		return nil, nil, invalidConfig("prevResult", "CHECK needs the result of ADD: the runtime must pass it as prevResult")
	}
	want, err := ReservationFromResult(prev, args.IfName)
	if err != nil {
		return nil, nil, types.NewError(types.ErrDecodingFailure, "CHECK: prevResult: pass the result of ADD unchanged", err.Error())
	}
	return prev, want, nil
}

func reservationMissing(args *CmdArgs, want Reservation, why string) error {
	return types.NewError(CodeReservationMissing,
		fmt.Sprintf("CHECK: interface %s of container %s has no reservation in ipamd (it was configured with %s): delete and re-create the pod sandbox", args.IfName, args.ContainerID, want),
		why)
}

// GC releases the network's reservations that are not valid attachments.
func (p *Plugin) GC(args *CmdArgs) error {
	c, done, err := p.begin("GC", args)
	if err != nil {
		return err
	}
	defer done()
	if err := gcValid(c.conf); err != nil {
		return err
	}
	valid := make([]api.Attachment, len(c.conf.ValidAttachments))
	for i, a := range c.conf.ValidAttachments {
		valid[i] = api.Attachment{ContainerID: a.ContainerID, Interface: a.IfName}
	}
	resp, err := c.client.GC(c.ctx, &api.GCRequest{Network: c.conf.NetworkConfig(), ValidAttachments: valid})
	if err != nil {
		c.log.Error("gc failed", "error", err)
		return fromIPAMD("GC", c.conf.SocketPath, err)
	}
	c.log.Info("garbage collected", "valid", len(valid), "released", resp.Released)
	return nil
}

// gcValid refuses a GC without the list of valid attachments: without it every
// reservation of the network would look stale.
func gcValid(conf *Config) error {
	if !conf.HasValidAttachments {
		return invalidConfig("cni.dev/valid-attachments", "GC needs the list of valid attachments; refusing to release every reservation of the network")
	}
	return nil
}

// Status fails with code 50 when ADD cannot succeed.
func (p *Plugin) Status(args *CmdArgs) error {
	c, done, err := p.begin("STATUS", args)
	if err != nil {
		return err
	}
	defer done()
	resp, err := c.client.Status(c.ctx, &api.StatusRequest{Network: c.conf.NetworkConfig()})
	if err != nil {
		return statusError(fromIPAMD("STATUS", c.conf.SocketPath, err))
	}
	if !resp.Ready {
		msg := resp.Message
		if msg == "" {
			msg = "every pool it can use is exhausted"
		}
		return types.NewError(types.ErrPluginNotAvailable,
			fmt.Sprintf("STATUS: network %s cannot serve ADD: %s: free addresses or add a pool", c.conf.Network, msg), "")
	}
	return nil
}

// statusError is STATUS's failure: code 50 (plugin not available) unless the
// configuration is at fault.
func statusError(e *types.Error) *types.Error {
	if e.Code == types.ErrInvalidNetworkConfig {
		return e
	}
	return types.NewError(types.ErrPluginNotAvailable, e.Msg, e.Details)
}

// Print writes result to w in the CNI version the config asked for, as
// types.PrintResult does.
func Print(w io.Writer, result types.Result, cniVersion string) error {
	out, err := result.GetAsVersion(cniVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("cannot express the result in cniVersion %q: use one of %v", cniVersion, SupportedVersions.SupportedVersions()), err.Error())
	}
	if err := out.PrintTo(w); err != nil {
		return types.NewError(types.ErrIOFailure, "write the result to stdout", err.Error())
	}
	return nil
}
