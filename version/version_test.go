package version_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nicpool/nicpool/version"
)

// Every version a binary can report is a label value the API server accepts, and a
// version that already is one is kept as it is.
func TestLabel(t *testing.T) {
	for v, want := range map[string]string{
		"v0.1.0":                  "v0.1.0",
		"v0.1.0-3-gabcdef0-dirty": "v0.1.0-3-gabcdef0-dirty",
		"v0.1.1-0.20261202221104-3458065ede3c+dirty": "v0.1.1-0.20261202221104-3458065ede3c_dirty",
		"dev":                    "dev",
		"+":                      "dev",
		"-v1-":                   "v1",
		strings.Repeat("v1", 40): strings.Repeat("v1", 31) + "v",
	} {
		got := version.Label(v)
		if got != want {
			t.Errorf("Label(%q) = %q, want %q", v, got, want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("Label(%q) = %q, which the API server refuses: %v", v, got, errs)
		}
	}
	if errs := validation.IsValidLabelValue(version.Label(version.Get().Version)); len(errs) > 0 {
		t.Errorf("this binary's version %q: %v", version.Get().Version, errs)
	}
}
