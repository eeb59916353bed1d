package gc

import (
	"flag"
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

func TestBindFlags(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("nicpool-webhook", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--gc-interval=5m", "--gc-keep-terminating", "--gc-release-on-not-ready-node"}); err != nil {
		t.Fatal(err)
	}
	want := Options{Interval: 5 * time.Minute, MinAge: ptr.To(DefaultMinAge), TerminatingGrace: ptr.To(DefaultTerminatingGrace),
		KeepTerminating: true, ReleaseOnNotReadyNode: true, Debounce: DefaultDebounce}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("options = %+v, want %+v", o, want)
	}
}

// An explicit 0 on the command line means "at once", and must survive the defaulting
// that SetupWithManager and NewCollector both apply (a nil field means "default").
func TestBindFlagsExplicitZero(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("nicpool-webhook", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--gc-min-age=0", "--gc-terminating-grace=0s"}); err != nil {
		t.Fatal(err)
	}
	c := NewCollector(nil, nil, o.withDefaults())
	if got := *c.opts.MinAge; got != 0 {
		t.Errorf("min age after defaulting twice = %v, want 0", got)
	}
	if got := *c.opts.TerminatingGrace; got != 0 {
		t.Errorf("terminating grace after defaulting twice = %v, want 0", got)
	}
	if got := fs.Lookup("gc-min-age").Value.String(); got != "0s" {
		t.Errorf("flag shows %q, want 0s", got)
	}
}
