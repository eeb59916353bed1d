package gc

import (
	"testing"
	"time"
)

func TestAbsenceClock(t *testing.T) {
	var c absenceClock
	minAge := time.Minute
	t0 := now

	ripe, next := c.ripe([]string{"a", "b"}, t0, minAge)
	if len(ripe) != 0 || !next.Equal(t0.Add(minAge)) {
		t.Fatalf("first sight: ripe %v next %v; want none ripe, next at %v", ripe, next, t0.Add(minAge))
	}
	// "b" comes back (its pod was seen after all); "c" appears.
	ripe, next = c.ripe([]string{"a", "c"}, t0.Add(30*time.Second), minAge)
	if len(ripe) != 0 || !next.Equal(t0.Add(minAge)) {
		t.Fatalf("half way: ripe %v next %v", ripe, next)
	}
	ripe, next = c.ripe([]string{"a", "b", "c"}, t0.Add(minAge), minAge)
	if !ripe["a"] || ripe["b"] || ripe["c"] || len(ripe) != 1 {
		t.Fatalf("after minAge: ripe %v; want only a (b was forgotten, c is younger)", ripe)
	}
	if want := t0.Add(30*time.Second + minAge); !next.Equal(want) {
		t.Fatalf("next = %v, want %v", next, want)
	}
	// Zero minimum age: everything is ripe at once.
	var z absenceClock
	if ripe, _ := z.ripe([]string{"x"}, t0, 0); !ripe["x"] {
		t.Fatalf("minAge 0: ripe %v, want x", ripe)
	}
}
