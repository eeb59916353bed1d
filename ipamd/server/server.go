// Package server exposes the service on ipamd's unix socket with the HTTP+JSON
// contract of ipamd/api. It decodes, asks the service, encodes: no decisions here.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nicpool/nicpool/ipamd/api"
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
			writeError(w, &api.Error{Code: api.CodeTryAgainLater, Message: "ipamd is starting: its caches are not synced yet"})
			return
		}
		req := new(Req)
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		if err := dec.Decode(req); err != nil {
			writeError(w, &api.Error{Code: api.CodeDecodingFailure, Message: "undecodable " + path + " request", Details: err.Error()})
			return
		}
		ctx, cancel := patience(r)
		defer cancel()
		resp, err := fn(ctx, req)
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) {
				ae = &api.Error{Code: api.CodeInternal, Message: "ipamd failed", Details: err.Error()}
			}
			writeError(w, ae)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// patience is the request's context, ending a little before its caller gives up when
// the caller said when (api.HeaderTimeout): the answer must reach it in time.
func patience(r *http.Request) (context.Context, context.CancelFunc) {
	ms, err := strconv.ParseInt(r.Header.Get(api.HeaderTimeout), 10, 64)
	if err != nil || ms <= 0 || ms > int64(time.Hour/time.Millisecond) {
		return context.WithCancel(r.Context())
	}
	wait := time.Duration(ms) * time.Millisecond
	return context.WithTimeout(r.Context(), wait-min(wait/5, 2*time.Second))
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
