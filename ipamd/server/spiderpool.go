package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/ipamd/guard"
	"github.com/nicpool/nicpool/ipamd/service"
)

// SpiderpoolHandler is what ipamd serves on the socket of spiderpool's agent, for the
// plugins of spiderpool that stay after a migration: coordinator's configuration
// (ipamd/coordinator) and nothing else. Answers are spiderpool's: 200 with the
// configuration, or 500 with a JSON string saying why, which coordinator prints.
func SpiderpoolHandler(svc *service.Service, ready func() bool) http.Handler {
	return SpiderpoolHandlerLimits(svc, ready, DefaultLimits)
}

// SpiderpoolHandlerLimits is SpiderpoolHandler with other limits (tests).
func SpiderpoolHandlerLimits(svc *service.Service, ready func() bool, lim Limits) http.Handler {
	h := &handler{log: svc.Log, lim: lim, parses: make(chan struct{}, max(lim.MaxParses, 1))}
	mux := http.NewServeMux()
	mux.HandleFunc(coordinator.Path, func(w http.ResponseWriter, r *http.Request) {
		fail := func(msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write(coordinator.ErrorBody(msg))
		}
		if r.Method != http.MethodGet {
			fail("use GET with spiderpool's GetCoordinatorArgs as a JSON body")
			return
		}
		if !ready() {
			fail(errStarting.Message)
			return
		}
		release, err := h.parse(r.Context())
		if err != nil {
			return // the caller has gone
		}
		body, err := h.readBody(w, r, coordinator.MaxRequest)
		release()
		req := &coordinator.Request{}
		if err == nil {
			err = json.Unmarshal(body, req)
		}
		if err != nil {
			fail(fmt.Sprintf("undecodable %s request: %v", coordinator.Path, err))
			return
		}
		cfg, err := coordinatorConfig(r.Context(), h, svc, req)
		if err != nil {
			fail(err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cfg)
	})
	return mux
}

// coordinatorConfig asks the service under the recovery every verb has.
func coordinatorConfig(ctx context.Context, h *handler, svc *service.Service, req *coordinator.Request) (cfg *coordinator.Config, err error) {
	defer guard.Recover(h.log, coordinator.Path, func(p *guard.Panic) {
		cfg, err = nil, errors.New(p.Error())
	})
	return svc.CoordinatorConfig(ctx, req)
}
