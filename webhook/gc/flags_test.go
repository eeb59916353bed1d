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
	if err := fs.Parse([]string{"--gc-interval=5m", "--gc-keep-terminating"}); err != nil {
		t.Fatal(err)
	}
	want := Options{Interval: 5 * time.Minute, MinAge: DefaultMinAge, TerminatingGrace: DefaultTerminatingGrace,
		KeepTerminating: true, Debounce: DefaultDebounce}
	if o != want {
		t.Errorf("options = %+v, want %+v", o, want)
	}
}
