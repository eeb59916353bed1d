package metrics_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/metrics"
)

// A failed ADD is counted under the reason its CNI error code gives the runtime.
func TestFailureOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&api.Error{Code: api.CodePoolExhausted}, metrics.OutcomeExhausted},
		{&api.Error{Code: api.CodeNoPool}, metrics.OutcomeNoPool},
		{&api.Error{Code: api.CodeInvalidConfig}, metrics.OutcomeInvalidRequest},
		{&api.Error{Code: api.CodeDecodingFailure}, metrics.OutcomeInvalidRequest},
		{&api.Error{Code: api.CodeTryAgainLater}, metrics.OutcomeTryAgain},
		{fmt.Errorf("record endpoint: %w", &api.Error{Code: api.CodeTryAgainLater}), metrics.OutcomeTryAgain},
		{&api.Error{Code: api.CodeInternal}, metrics.OutcomeError},
		{errors.New("no CNI code"), metrics.OutcomeError},
	} {
		if got := metrics.FailureOutcome(tc.err); got != tc.want {
			t.Errorf("FailureOutcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
