package service

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An allocation Event's note begins with spiderpool's prefix, and stays within what the
// API server accepts: a longer note is refused and the pod would show no Event.
func TestEventNote(t *testing.T) {
	short := "interface eth0: no free IPv4 address for interface eth0 in pools [a]: all IP addresses used out: pool a has no free IPv4 address"
	if got := eventNote(short); got != "spiderpool IP allocation error: "+short {
		t.Errorf("short note: %q", got)
	}

	// Many exhausted pools: the first causes, spiderpool's phrase among them, stay.
	var causes []string
	for _, p := range []string{"pool-a", "pool-b", "pool-c", "pool-d", "pool-e", "pool-f", "pool-g"} {
		causes = append(causes, "all IP addresses used out: pool "+p+" has no free IPv4 address: 1 allocated of 1 allocatable (0 more withheld by SpiderReservedIP); add addresses to spec.ips or release pods")
	}
	long := "interface eth0: no free IPv4 address for interface eth0 in pools [...]: " + strings.Join(causes, "; ")
	got := eventNote(long)
	if len(got) > 1024 || !strings.HasPrefix(got, "spiderpool IP allocation error: interface eth0: ") ||
		!strings.Contains(got, "all IP addresses used out: pool pool-a has no free IPv4 address") || !strings.HasSuffix(got, " ...") {
		t.Errorf("long note (%d bytes): %q", len(got), got)
	}

	// Cut on a character boundary: a pool name is ASCII, but a reason may quote a
	// pod's annotation, which need not be.
	for pad := range 4 {
		wide := strings.Repeat("x", pad) + strings.Repeat("é", 600)
		got := eventNote(wide)
		if len(got) > 1024 || !utf8.ValidString(got) || !strings.HasSuffix(got, " ...") {
			t.Errorf("pad %d: %d bytes, valid UTF-8 %v, ends %q", pad, len(got), utf8.ValidString(got), got[len(got)-8:])
		}
	}
}
