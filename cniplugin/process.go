package cniplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/sys/unix"

	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/ipamd/api"
)

// The library's names that this process's users (the installer, the test stacks)
// configure it by.
const (
	Name           = cni.Name
	NameSpiderpool = cni.NameSpiderpool
	RunDir         = cni.RunDir
	LogDir         = cni.LogDir
	DefaultTimeout = cni.DefaultTimeout
)

// Main serves the CNI call this process was started for with the library, which
// relays it to ipamd (cni.Plugin.Relay): it prints an error as CNI error JSON on
// stdout and exits 1, exits with the code of ipamd's answer, or returns. Without
// CNI_COMMAND it prints about and the CNI versions it speaks on stderr.
func Main(about string) {
	err := Process(os.Stdout).Relay(&cni.Call{Getenv: os.Getenv, Stdin: os.Stdin}, about)
	if err == nil {
		return
	}
	var exit *cni.Exit
	if errors.As(err, &exit) {
		os.Exit(exit.Code)
	}
	var e *types.Error
	if !errors.As(err, &e) {
		// The process's dependencies never hand a call off; a bug if they do.
		e = types.NewError(types.ErrInternal, "nicpool plugin bug: "+err.Error()+": report it", "")
	}
	if perr := cni.PrintError(os.Stdout, e); perr != nil {
		_, _ = fmt.Fprintln(os.Stderr, "writing the CNI error to stdout:", perr)
	}
	os.Exit(1)
}

// Process is the plugin as this process runs it, printing to stdout: its log is
// stderr or a file beneath cni.LogDir opened following no symlink, it sends its
// frames to the socket beneath cni.RunDir that the configuration names, reached the
// same way, and CNI_NETNS is compared with this process's own network namespace.
func Process(stdout io.Writer) *cni.Plugin {
	return &cni.Plugin{
		Stdout:  stdout,
		Stderr:  os.Stderr,
		Name:    cni.InstalledName(os.Args[0]),
		PID:     os.Getpid(),
		OpenLog: func(rel string) (io.WriteCloser, error) { return logDir().appendTo(rel) },
		Send:    sendFrame,
		NetNS:   netnsRelation,
	}
}

// sendFrame sends f to ipamd on the configured socket.
func sendFrame(ctx context.Context, socket string, f *api.Frame) (*api.Answer, error) {
	return api.NewClientDial(func(ctx context.Context) (net.Conn, error) { return dialSocket(ctx, socket) }, 0).Call(ctx, f)
}

// netnsRelation stats path against the plugin's own network namespace. A path the
// plugin cannot stat is another: its own namespace is always there to stat, so such a
// path is some other namespace or none (most often DEL of a sandbox whose namespace is
// gone). The plugin never enters another namespace, so every thread of it is in the
// process's own: no thread is locked to read it (locking one makes the Go runtime
// start a thread of its own, a cost on every ADD and DEL). The front finds the same
// relation the same way (cniplugin/front/nicpool.c, netns_is_own) and sends it in its
// frame.
func netnsRelation(path string) string {
	if path == "" {
		return ""
	}
	var target unix.Stat_t
	if err := unix.Stat(path, &target); err != nil {
		return api.NetNSOther
	}
	var own unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &own); err != nil {
		return api.NetNSNoSelf
	}
	if own.Dev == target.Dev && own.Ino == target.Ino {
		return api.NetNSSame
	}
	return api.NetNSOther
}
