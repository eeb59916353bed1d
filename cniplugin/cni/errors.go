package cni

import (
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/ipamd/api"
)

// nicpool's own CNI error codes (the spec leaves 100 and above to plugins; ipamd uses
// 101 and 102).
const (
	// CodeReservationMissing: CHECK found no reservation for the interface in ipamd.
	CodeReservationMissing uint = 110
	// CodeReservationDiffers: CHECK found a reservation other than prevResult's.
	CodeReservationDiffers uint = 111
)

// fromIPAMD turns a failed call to ipamd into the CNI error the runtime sees, keeping
// ipamd's code and saying what to do.
func fromIPAMD(verb, socket string, err error) *types.Error {
	var refused *RefusedPath
	if errors.As(err, &refused) {
		return invalidConfig("ipam.ipam_unix_socket_path", fmt.Sprintf("%s: %v: name ipamd's socket beneath %s, or leave the key out (the default is %s)", verb, refused, RunDir, api.DefaultSocketPath))
	}
	if errors.Is(err, api.ErrUnreachable) {
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("%s: ipamd is not answering on %s: try again later; if it persists, check that the nicpool-ipamd pod runs on this node and that ipam_unix_socket_path matches its socket", verb, socket),
			err.Error())
	}
	var e *api.Error
	if errors.As(err, &e) {
		code := e.Code
		if code == 0 {
			code = types.ErrInternal
		}
		msg := fmt.Sprintf("%s: %s", verb, e.Message)
		if hint, ok := hints[code]; ok && !strings.Contains(e.Message, hint.mentions) {
			msg += ": " + hint.text
		}
		return types.NewError(code, msg, e.Details)
	}
	return types.NewError(types.ErrInternal, fmt.Sprintf("%s: %v", verb, err), "")
}

// hints say what to do for each code ipamd answers with, unless its message already
// mentions it.
var hints = map[uint]struct{ mentions, text string }{
	api.CodeTryAgainLater: {"try again", "try again later (ipamd is starting or cannot reach the API server)"},
	api.CodeInternal:      {"report", "this is a bug in nicpool: report it with ipamd's log"},
}

// guard turns a panic in a verb into a CNI error, so that a runtime always receives a
// JSON error and never a Go stack trace on stdout.
func guard(verb string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = types.NewError(types.ErrInternal,
				fmt.Sprintf("%s: nicpool plugin bug: %v: report it with the network configuration", verb, r), "")
		}
	}()
	return fn()
}
