// Package server exposes the service on ipamd's unix socket with the HTTP+JSON
// contract of ipamd/api. It decodes, asks the service, encodes: no decisions here.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/metrics"
	"github.com/nicpool/nicpool/ipamd/service"
)

// Handler serves the ipamd API. ready reports whether the caches have synced; until
// then every verb answers CNI code 11 (try again later).
func Handler(svc *service.Service, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	handle(mux, api.PathAllocate, ready, svc.Allocate)
	handle(mux, api.PathRelease, ready, svc.Release)
	handle(mux, api.PathCheck, ready, svc.Check)
	handle(mux, api.PathGC, ready, svc.GC)
	handle(mux, api.PathStatus, ready, svc.Status)
	mux.HandleFunc(api.PathCNI, forwarded(&local{svc: svc, ready: ready}))
	mux.HandleFunc(api.PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

func handle[Req, Resp any](mux *http.ServeMux, path string, ready func() bool, fn func(context.Context, *Req) (*Resp, error)) {
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeError(w, &api.Error{Code: api.CodeDecodingFailure, Message: "use POST with a JSON body"})
			return
		}
		if !ready() {
			writeError(w, errStarting)
			return
		}
		req := new(Req)
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		if err := dec.Decode(req); err != nil {
			writeError(w, &api.Error{Code: api.CodeDecodingFailure, Message: "undecodable " + path + " request", Details: err.Error()})
			return
		}
		var wait time.Duration
		if ms, err := strconv.ParseInt(r.Header.Get(api.HeaderTimeout), 10, 64); err == nil && ms > 0 && ms <= int64(time.Hour/time.Millisecond) {
			wait = time.Duration(ms) * time.Millisecond
		}
		resp, err := call(r.Context(), wait, fn, req)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// call runs one verb of the service. wait is how long its caller waits for the answer
// (0: not said); the verb's context ends a little before, so that the answer reaches
// the caller in time. Every error is an *api.Error.
func call[Req, Resp any](ctx context.Context, wait time.Duration, fn func(context.Context, *Req) (*Resp, error), req *Req) (*Resp, *api.Error) {
	var cancel context.CancelFunc
	if wait > 0 {
		ctx, cancel = context.WithTimeout(ctx, wait-min(wait/5, 2*time.Second))
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	resp, err := fn(ctx, req)
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			ae = &api.Error{Code: api.CodeInternal, Message: "ipamd failed", Details: err.Error()}
		}
		return nil, ae
	}
	return resp, nil
}

// local is the service as the CNI plugin's code sees ipamd when ipamd runs it for a
// call of the front: the same verbs, readiness and errors as on the socket, without
// the HTTP and JSON between them.
type local struct {
	svc   *service.Service
	ready func() bool
}

var errStarting = &api.Error{Code: api.CodeTryAgainLater, Message: "ipamd is starting: its caches are not synced yet"}

// localCall is call for the plugin's code: the caller's wait is its context's deadline.
func localCall[Req, Resp any](ctx context.Context, l *local, fn func(context.Context, *Req) (*Resp, error), req *Req) (*Resp, error) {
	if !l.ready() {
		return nil, errStarting
	}
	var wait time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		wait = max(time.Until(deadline), time.Millisecond)
	}
	resp, err := call(ctx, wait, fn, req)
	if err != nil {
		return nil, err // not a nil *api.Error in a non-nil error
	}
	return resp, nil
}

func (l *local) Allocate(ctx context.Context, req *api.AllocateRequest) (*api.AllocateResponse, error) {
	return localCall(ctx, l, l.svc.Allocate, req)
}

func (l *local) Release(ctx context.Context, req *api.ReleaseRequest) (*api.ReleaseResponse, error) {
	return localCall(ctx, l, l.svc.Release, req)
}

func (l *local) Check(ctx context.Context, req *api.CheckRequest) (*api.CheckResponse, error) {
	return localCall(ctx, l, l.svc.Check, req)
}

func (l *local) GC(ctx context.Context, req *api.GCRequest) (*api.GCResponse, error) {
	return localCall(ctx, l, l.svc.GC, req)
}

func (l *local) Status(ctx context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	return localCall(ctx, l, l.svc.Status, req)
}

// forwarded serves api.PathCNI: a CNI call of the front, run by the plugin's own code
// with ipamd as its ipamd. The answer is the plugin's stdout then its stderr; 421 hands
// the call back to the front, which then runs nicpool-cni.
func forwarded(ipamd cniplugin.IPAMD) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "use POST with a frame of the plugin's front", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cniplugin.MaxForwarded))
		if err != nil {
			metrics.CNICalls.WithLabelValues("other", metrics.CNIUndecodable).Inc()
			http.Error(w, "read the front's frame: "+err.Error(), http.StatusMisdirectedRequest)
			return
		}
		f, err := cniplugin.DecodeForwarded(body)
		if err != nil {
			metrics.CNICalls.WithLabelValues("other", metrics.CNIUndecodable).Inc()
			http.Error(w, "undecodable frame of the plugin's front: "+err.Error(), http.StatusMisdirectedRequest)
			return
		}
		verb := metrics.CNIVerb(f.Env["CNI_COMMAND"])
		a, handOff := cniplugin.ServeForwarded(r.Context(), f, ipamd)
		if handOff != nil {
			metrics.CNICalls.WithLabelValues(verb, handOff.Kind).Inc()
			http.Error(w, handOff.Error(), http.StatusMisdirectedRequest)
			return
		}
		metrics.CNICalls.WithLabelValues(verb, metrics.CNIServed).Inc()
		WriteAnswer(w, a)
	}
}

// WriteAnswer writes api.PathCNI's answer for a call ipamd ran: the plugin's stdout
// then its stderr, with its exit code and stdout's length in headers, as the front
// (cniplugin/front/nicpool.c) reads them.
func WriteAnswer(w http.ResponseWriter, a *cniplugin.Answer) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(a.Stdout)+len(a.Stderr)))
	h.Set(api.HeaderExit, strconv.Itoa(a.Exit))
	h.Set(api.HeaderStdout, strconv.Itoa(len(a.Stdout)))
	_, _ = w.Write(a.Stdout)
	_, _ = w.Write(a.Stderr)
}

func writeError(w http.ResponseWriter, e *api.Error) {
	status := http.StatusInternalServerError
	switch e.Code {
	case api.CodeTryAgainLater:
		status = http.StatusServiceUnavailable
	case api.CodeInvalidConfig, api.CodeDecodingFailure:
		status = http.StatusBadRequest
	case api.CodePoolExhausted, api.CodeNoPool:
		status = http.StatusConflict
	case api.CodeUnknownContainer:
		status = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
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

// Serve serves h on l until ctx ends, then drains in-flight requests.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
