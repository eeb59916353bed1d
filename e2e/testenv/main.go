package testenv

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Setup is what a test package's TestMain starts for all its tests (one control plane
// per package, CONTRIBUTING.md, and what the package builds on it). Main stops it.
type Setup struct {
	stops []func() error
}

// Defer registers stop to run after the package's tests, or after setup failed; stops
// run last registered first, and their errors are reported.
func (s *Setup) Defer(stop func() error) { s.stops = append(s.stops, stop) }

// Start starts a control plane (see Start) that stops after the package's tests.
func (s *Setup) Start(opts Options) (*Env, error) {
	e, err := Start(opts)
	if err != nil {
		return nil, err
	}
	s.Defer(e.Stop)
	return e, nil
}

// Main is the TestMain of a test package whose tests share what setup starts: it runs
// setup (nil when they share nothing), then the tests when setup succeeded, then every stop setup registered, and
// exits with the tests' code (1 when setup failed); errors of setup and of stops go to
// stderr.
//
// controller-runtime's log is discarded unless the package set a logger before calling
// Main, so that no test prints its "log.SetLogger(...) was never called" stack.
func Main(m *testing.M, setup func(*Setup) error) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m, setup))
}

func run(m *testing.M, setup func(*Setup) error) int {
	var s Setup
	defer func() {
		var errs []error
		for _, stop := range slices.Backward(s.stops) {
			errs = append(errs, stop())
		}
		if err := errors.Join(errs...); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()
	if setup == nil {
		return m.Run()
	}
	if err := setup(&s); err != nil {
		fmt.Fprintln(os.Stderr, "set up the package's tests:", err)
		return 1
	}
	return m.Run()
}
