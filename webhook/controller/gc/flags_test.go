package gc

import (
	"flag"
	"testing"
	"time"
)

func TestBindFlags(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("nicpool-webhook", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--gc-interval=5m", "--gc-keep-terminating", "--gc-release-on-not-ready-node"}); err != nil {
		t.Fatal(err)
	}
	want := Options{Interval: 5 * time.Minute, MinAge: DefaultMinAge, TerminatingGrace: DefaultTerminatingGrace,
		KeepTerminating: true, ReleaseOnNotReadyNode: true, Debounce: DefaultDebounce}
	if o != want {
		t.Errorf("options = %+v, want %+v", o, want)
	}
}

// An explicit 0 on the command line means "at once", and must survive the defaulting
// that SetupWithManager and NewCollector both apply (a zero field means "default").
func TestBindFlagsExplicitZero(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("nicpool-webhook", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--gc-min-age=0", "--gc-terminating-grace=0s"}); err != nil {
		t.Fatal(err)
	}
	c := NewCollector(nil, nil, o.withDefaults())
	if got := max(c.opts.MinAge, 0); got != 0 {
		t.Errorf("min age after defaulting twice = %v, want 0", got)
	}
	if got := max(c.opts.TerminatingGrace, 0); got != 0 {
		t.Errorf("terminating grace after defaulting twice = %v, want 0", got)
	}
	if got := fs.Lookup("gc-min-age").Value.String(); got != "0s" {
		t.Errorf("flag shows %q, want 0s", got)
	}
}
