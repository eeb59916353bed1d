package views

// LiveReads bounds the reads of the API server that one admission request may cause
// when a view misses (an object created a moment ago, not yet seen by the informer).
// A pod author controls how many misses a request has; with this bound, a request
// costs the API server at most so many reads whatever its annotations name. Misses
// beyond it are answered from the views alone. The zero value allows none; a nil
// *LiveReads allows any number.
type LiveReads struct {
	left int
}

// NewLiveReads allows n reads.
func NewLiveReads(n int) *LiveReads { return &LiveReads{left: n} }

// take reports whether one more read is allowed, and counts it.
func (r *LiveReads) take() bool {
	if r == nil {
		return true
	}
	if r.left <= 0 {
		return false
	}
	r.left--
	return true
}
