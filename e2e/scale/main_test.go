package scale

import (
	"os"
	"testing"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// bins are nicpool's binaries built from this checkout for the package's runs.
var bins binaries.Set

// TestMain builds the binaries every test and benchmark runs. It starts no control
// plane: each scenario measures on a control plane of its own (runScenario), and
// TestHarness starts the one it uses, so that a benchmark run starts none it does not
// measure. testenv.Main also keeps controller-runtime's log out of the figures.
func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) error {
		dir, err := os.MkdirTemp("", "nicpool-scale-bin-")
		if err != nil {
			return err
		}
		s.Defer(func() error { return os.RemoveAll(dir) })
		bins, err = binaries.Build(dir)
		return err
	})
}
