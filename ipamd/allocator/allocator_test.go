package allocator

import (
	"strings"
	"testing"

	"github.com/nicpool/nicpool/e2e/fixtures"
)

func TestNewRangeInvalidSpec(t *testing.T) {
	_, err := NewRange(fixtures.Pool("p", "10.6.0.1/24", nil), nil)
	if err == nil {
		t.Fatal("want an error naming spec.subnet")
	}
}

// The message begins with spiderpool's phrase for an exhausted pool, which users'
// alerts and spiderpool's own e2e suite match on, then names the pool and its counts.
func TestExhaustedMessageNamesPoolAndCounts(t *testing.T) {
	e := &ExhaustedError{Pool: "blue", Family: 4, Total: 10, Allocated: 10, Reserved: 2}
	want := "all IP addresses used out: pool blue has no free IPv4 address: 10 allocated of 10 allocatable (2 more withheld by SpiderReservedIP); add addresses to spec.ips or release pods"
	if e.Error() != want {
		t.Errorf("got %q", e.Error())
	}
}

func TestParseOrder(t *testing.T) {
	for _, o := range []Order{NextAfterLast, Lowest} {
		if got, err := ParseOrder(o.String()); err != nil || got != o {
			t.Errorf("ParseOrder(%q) = %v, %v", o, got, err)
		}
	}
	if _, err := ParseOrder("random"); err == nil || !strings.Contains(err.Error(), "next-after-last") {
		t.Errorf("ParseOrder(random) = %v, want an error listing the orders", err)
	}
}
