package gc

import "time"

// absenceClock remembers since when each absence-based release has been proposed, so
// that a record is released only after its pod has been missing for a minimum age.
// A record written by ipamd moments ago for a pod the cache has not seen yet is thus
// never released on the first sight of it. The clock lives in memory: after a leader
// change the new leader simply waits the minimum age again.
type absenceClock struct {
	since map[string]time.Time
}

// ripe returns which of the proposed keys have been proposed continuously for at least
// minAge, and the earliest instant at which one of the others will be. Keys not
// proposed this time are forgotten: their pod came back or they were released.
func (c *absenceClock) ripe(proposed []string, now time.Time, minAge time.Duration) (map[string]bool, time.Time) {
	if c.since == nil {
		c.since = map[string]time.Time{}
	}
	seen := make(map[string]time.Time, len(proposed))
	ripe := map[string]bool{}
	var next time.Time
	for _, k := range proposed {
		first, ok := c.since[k]
		if !ok {
			first = now
		}
		seen[k] = first
		if at := first.Add(minAge); !now.Before(at) {
			ripe[k] = true
		} else {
			next = earliest(next, at)
		}
	}
	c.since = seen
	return ripe, next
}
