package ledger

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The one retry policy of every compare-and-swap write of allocation state.
//
// A 409 Conflict means another writer made progress: the loser re-reads the object
// after a random pause of a few uncontended writes' time, doubling with each conflict
// in a row (up to maxPause), so that the losers of a round do not collide again, and
// retries everything still pending. An overloaded or briefly unavailable API server
// is retried after a growing pause; anything else fails the write.
const (
	// maxAttempts bounds the writes of one batch; a batch that loses this often is
	// starved rather than wrong.
	maxAttempts = 64
	// maxServerRetries bounds the retries of server-side failures (429, 503, timeouts).
	maxServerRetries = 5
	maxPause         = 2 * time.Second
	// writeTimeout bounds one write of a block. Its requests wait for it whatever
	// their callers do (see do), so it must end; a write that timed out may have
	// landed, which the next attempt's compare-and-swap finds out.
	writeTimeout = time.Minute
)

// conflictPause is the random pause before the re-read that follows the attempt-th
// conflict in a row; unit is the fastest write of the object seen.
func conflictPause(attempt int, unit time.Duration) time.Duration {
	unit = max(unit, time.Millisecond)
	window := min(unit<<min(attempt, 5), maxPause)
	return time.Duration(rand.Int64N(int64(window) + 1))
}

// serverRetry reports whether err is worth another attempt after a pause, and the
// pause, for the attempt-th failure in a row.
func serverRetry(err error, attempt int) (time.Duration, bool) {
	if attempt >= maxServerRetries {
		return 0, false
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		errors.Is(err, context.DeadlineExceeded) {
		return time.Duration(attempt) * 100 * time.Millisecond, true
	}
	return 0, false
}
