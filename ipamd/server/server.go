// Package server exposes the service on ipamd's unix socket with the contract of
// ipamd/api: one CNI call per frame, served with the CNI plugin's library
// (cniplugin/cni, ServeFrame) over the service, whoever sends it (the front,
// nicpool-cni, nicpool's Go client). It makes no decisions about addresses.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-logr/logr"
	"golang.org/x/net/netutil"

	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/guard"
	"github.com/nicpool/nicpool/ipamd/metrics"
	"github.com/nicpool/nicpool/ipamd/service"
)

// Handler serves the ipamd API. ready reports whether the caches have synced; until
// then every call answers CNI code 11 (try again later).
func Handler(svc *service.Service, ready func() bool) http.Handler {
	return HandlerLimits(svc, ready, DefaultLimits)
}

// HandlerLimits is Handler with other limits than DefaultLimits (tests).
func HandlerLimits(svc *service.Service, ready func() bool, lim Limits) http.Handler {
	mux := http.NewServeMux()
	h := &handler{log: svc.Log, lim: lim, parses: make(chan struct{}, max(lim.MaxParses, 1))}
	mux.HandleFunc(api.PathCNI, h.forwarded(&local{svc: svc, ready: ready, log: svc.Log}))
	mux.HandleFunc(api.PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// Limits bound what the socket's clients can make ipamd hold. The socket is root's
// only, but what its requests carry is not: a network configuration is written by
// whoever may create a NetworkAttachmentDefinition.
type Limits struct {
	// HeaderTimeout and BodyTimeout bound how long a request's header, then its body,
	// may take to arrive (the front and nicpool-cni send a frame at once).
	HeaderTimeout, BodyTimeout time.Duration
	// IdleTimeout closes a connection kept open between requests.
	IdleTimeout time.Duration
	// MaxConns caps the connections served at once; more wait in the socket's
	// backlog until one ends. Each holds a goroutine and its buffers while its call
	// waits for its turn, not the request it carried.
	MaxConns int
	// MaxParses caps the requests being read and decoded at once: up to MaxFrame
	// each, and what decoding makes of it. A call holds its slot until its
	// configuration is parsed and dropped, before it waits for its turn.
	MaxParses int
}

// DefaultLimits are ipamd's: see docs/security.md for what they cost.
var DefaultLimits = Limits{HeaderTimeout: 10 * time.Second, BodyTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, MaxConns: 512, MaxParses: 4}

// handler is what every endpoint shares: the log, the limits and the parse slots.
type handler struct {
	log    logr.Logger
	lim    Limits
	parses chan struct{}
}

// parse takes a parse slot, waiting for one while ctx lasts; release gives it back
// and may be called more than once.
func (h *handler) parse(ctx context.Context) (release func(), err error) {
	select {
	case h.parses <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { <-h.parses }) }, nil
}

// errTooLarge says a request's body is over its bound.
var errTooLarge = errors.New("too large")

// readBody reads a request's body of at most limit bytes, within BodyTimeout.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", errTooLarge, r.ContentLength, limit)
	}
	rc := http.NewResponseController(w)
	if h.lim.BodyTimeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(h.lim.BodyTimeout))
		// The call may wait for its turn far longer than the body may take to come.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, limit)
	}
	return body, err
}

// local is the service as the CNI plugin's library sees ipamd when ipamd runs it on a
// frame: the verbs, after the readiness check, bounded by the caller's wait and under
// the verbs' recovery.
type local struct {
	svc   *service.Service
	ready func() bool
	log   logr.Logger
	// parsed gives back the call's parse slot: the plugin's code calls a verb once it
	// has parsed the configuration and dropped it.
	parsed func()
}

var errStarting = &api.Error{Code: api.CodeTryAgainLater, Message: "ipamd is starting: its caches are not synced yet"}

// localCall runs one verb of the service for the plugin's code, once ipamd is ready.
// The caller's wait is its context's deadline; the verb's context ends a little
// before, so that the answer reaches the caller in time. Every error is an
// *api.Error. A panic in the verb is the bug's internal error, under the recovery
// every goroutine serving the verbs shares (ipamd/guard).
func localCall[Req, Resp any](ctx context.Context, l *local, verb string, fn func(context.Context, *Req) (*Resp, error), req *Req) (resp *Resp, err error) {
	if l.parsed != nil {
		l.parsed()
	}
	if !l.ready() {
		return nil, errStarting
	}
	defer guard.Recover(l.log, "the CNI verb "+verb, func(p *guard.Panic) {
		resp, err = nil, &api.Error{Code: api.CodeInternal, Message: p.Error()}
	})
	var cancel context.CancelFunc
	if deadline, ok := ctx.Deadline(); ok {
		wait := max(time.Until(deadline), time.Millisecond)
		ctx, cancel = context.WithTimeout(ctx, wait-min(wait/5, 2*time.Second))
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	if resp, err = fn(ctx, req); err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			ae = &api.Error{Code: api.CodeInternal, Message: "ipamd failed", Details: err.Error()}
		}
		return nil, ae
	}
	return resp, nil
}

func (l *local) Allocate(ctx context.Context, req *api.AllocateRequest) (*api.AllocateResponse, error) {
	return localCall(ctx, l, "ADD", l.svc.Allocate, req)
}

func (l *local) Release(ctx context.Context, req *api.ReleaseRequest) (*api.ReleaseResponse, error) {
	return localCall(ctx, l, "DEL", l.svc.Release, req)
}

func (l *local) Check(ctx context.Context, req *api.CheckRequest) (*api.CheckResponse, error) {
	return localCall(ctx, l, "CHECK", l.svc.Check, req)
}

func (l *local) GC(ctx context.Context, req *api.GCRequest) (*api.GCResponse, error) {
	return localCall(ctx, l, "GC", l.svc.GC, req)
}

func (l *local) Status(ctx context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	return localCall(ctx, l, "STATUS", l.svc.Status, req)
}

// forwarded serves api.PathCNI: a CNI call in a frame (of the front, of nicpool-cni,
// of the Go client), run by the plugin's library with ipamd as its ipamd
// (ServeFrame). The answer is the plugin's stdout then its stderr;
// api.StatusHandBack hands the call back to the front, which then runs nicpool-cni:
// so does a call over api.MaxFrame or api.MaxConfig, which ipamd neither reads in
// full nor parses.
func (h *handler) forwarded(ipamd *local) http.HandlerFunc {
	handBack := func(w http.ResponseWriter, verb, kind, why string) {
		metrics.CNICalls.WithLabelValues(verb, kind).Inc()
		http.Error(w, why, api.StatusHandBack)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "use POST with a frame of the plugin's front", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > int64(api.MaxFrame) {
			handBack(w, "other", cni.HandOffSize, fmt.Sprintf("the call is over ipamd's bound of %d bytes: nicpool-cni runs it", api.MaxFrame))
			return
		}
		release, err := h.parse(r.Context())
		if err != nil {
			return // the front has gone
		}
		defer release()
		body, err := h.readBody(w, r, int64(api.MaxFrame))
		if errors.Is(err, errTooLarge) {
			handBack(w, "other", cni.HandOffSize, "the call is over ipamd's bounds: "+err.Error())
			return
		}
		if err != nil {
			handBack(w, "other", metrics.CNIUndecodable, "read the front's frame: "+err.Error())
			return
		}
		f, err := api.DecodeFrame(body)
		body = nil
		if err != nil {
			handBack(w, "other", metrics.CNIUndecodable, "undecodable frame of the plugin's front: "+err.Error())
			return
		}
		verb := metrics.CNIVerb(f.Env["CNI_COMMAND"])
		if len(f.Stdin) > api.MaxConfig {
			handBack(w, verb, cni.HandOffSize, fmt.Sprintf("the network configuration is over ipamd's bound of %d bytes: nicpool-cni runs the call", api.MaxConfig))
			return
		}
		var (
			a       *api.Answer
			handOff *cni.HandOff
		)
		func() {
			defer guard.Recover(h.log, "the front's call of "+verb, func(p *guard.Panic) {
				handOff = &cni.HandOff{Kind: cni.HandOffOther, Reason: p.Error()}
			})
			a, handOff = ServeFrame(r.Context(), f, &local{svc: ipamd.svc, ready: ipamd.ready, log: ipamd.log, parsed: release})
		}()
		if handOff != nil {
			handBack(w, verb, handOff.Kind, handOff.Error())
			return
		}
		metrics.CNICalls.WithLabelValues(verb, metrics.CNIServed).Inc()
		WriteAnswer(w, a)
	}
}

// ServeFrame serves a call of the front with the plugin's library, as nicpool-cni
// would serve it, with ipamd as its ipamd: it answers what nicpool-cni would have
// printed and its exit code, or hands the call back. The front's process is the
// frame's: its name, pid, and its finding about CNI_NETNS. What nicpool-cni's process
// does and ipamd does not (append to a host log file, reach a socket other than this
// one) hands the call off, before ipamd is asked anything.
func ServeFrame(ctx context.Context, f *api.Frame, ipamd cni.IPAMD) (*api.Answer, *cni.HandOff) {
	switch f.Env["CNI_COMMAND"] {
	case "", "VERSION":
		return nil, &cni.HandOff{Kind: cni.HandOffVersion, Reason: "nicpool-cni answers VERSION and its own usage"}
	}
	var stdout, stderr bytes.Buffer
	p := &cni.Plugin{
		Stdout:  &stdout,
		Stderr:  &stderr,
		Name:    cni.InstalledName(f.Name),
		PID:     f.PID,
		Context: ctx,
		OpenLog: func(string) (io.WriteCloser, error) {
			return nil, &cni.HandOff{Kind: cni.HandOffLogFile, Reason: "the network configuration names log_file_path, which the plugin writes itself"}
		},
		IPAMD: func(socket string) (cni.IPAMD, error) {
			if socket != api.DefaultSocketPath {
				return nil, &cni.HandOff{Kind: cni.HandOffSocket, Reason: "the network configuration names a socket other than " + api.DefaultSocketPath}
			}
			return ipamd, nil
		},
		NetNS: func(string) string { return f.NetNS },
	}
	call := &cni.Call{Getenv: func(name string) string { return f.Env[name] }, StdinData: f.Stdin}
	// From here the call holds the only reference to the configuration, which it
	// drops once parsed, before waiting for its turn.
	f.Stdin = nil
	err := p.Serve(call, "")
	var handOff *cni.HandOff
	if errors.As(err, &handOff) {
		return nil, handOff
	}
	a := &api.Answer{}
	if err != nil {
		var e *types.Error
		if !errors.As(err, &e) {
			e = types.NewError(types.ErrInternal, err.Error(), "")
		}
		a.Exit = 1
		if perr := cni.PrintError(&stdout, e); perr != nil {
			return nil, &cni.HandOff{Kind: cni.HandOffOther, Reason: "the error could not be printed: " + perr.Error()}
		}
	}
	a.Stdout, a.Stderr = stdout.Bytes(), stderr.Bytes()
	return a, nil
}

// WriteAnswer writes api.PathCNI's answer for a call ipamd ran: the plugin's stdout
// then its stderr, with its exit code and stdout's length in headers, as the front
// (cniplugin/front/nicpool.c) reads them.
func WriteAnswer(w http.ResponseWriter, a *api.Answer) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(a.Stdout)+len(a.Stderr)))
	h.Set(api.HeaderExit, strconv.Itoa(a.Exit))
	h.Set(api.HeaderStdout, strconv.Itoa(len(a.Stdout)))
	_, _ = w.Write(a.Stdout)
	_, _ = w.Write(a.Stderr)
}

// Listen opens the unix socket at path, root-only (0600), replacing a stale socket
// left by a previous run.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict socket %s to root: %w", path, err)
	}
	return l, nil
}

// Serve serves h on l until ctx ends, then drains in-flight requests, with
// DefaultLimits.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	return ServeLimits(ctx, l, h, DefaultLimits)
}

// ServeLimits is Serve with other limits (tests). The body timeout is the handlers'
// (HandlerLimits): net/http's ReadTimeout would also end the context of a call that
// waits for its turn longer than it.
func ServeLimits(ctx context.Context, l net.Listener, h http.Handler, lim Limits) error {
	if lim.MaxConns > 0 {
		l = netutil.LimitListener(l, lim.MaxConns)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.HeaderTimeout, IdleTimeout: lim.IdleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
