package scale

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nicpool/nicpool/e2e/binaries"
)

// bins are nicpool's binaries built from this checkout for the package's runs.
var bins binaries.Set

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// The control plane's clients log through controller-runtime; the figures are the
	// output.
	logf.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "nicpool-scale-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bins, err = binaries.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
