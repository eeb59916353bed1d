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

// What String writes, Parse reads back as it was; what String cannot have written is
// refused.
func TestParse(t *testing.T) {
	for _, i := range []version.Info{
		version.Get(),
		{Version: "v0.1.0", Revision: "3458065ede3c0a1b2c3d4e5f60718293a4b5c6d7", GoVersion: "go1.26.0"},
		{Version: "v0.1.0-3-gabcdef0-dirty", Revision: "unknown", GoVersion: "go1.26.0 X:nodwarf5"},
		{Version: "v0.1.1-0.20261202221104-3458065ede3c+dirty", Revision: "3458065ede3c", GoVersion: "devel go1.27-abcdef"},
	} {
		got, ok := version.Parse(i.String())
		if !ok || got != i {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", i.String(), got, ok, i)
		}
	}
	for _, s := range []string{
		"",
		"v0.1.0",
		"v0.1.0 (revision abc)",
		"v0.1.0 (revision abc, go1.26.0",
		" (revision abc, go1.26.0)",
		"v0.1.0 (revision , go1.26.0)",
		"v0.1.0 (revision abc, )",
		"nicpool-webhook v0.1.0 (revision abc, go1.26.0)",
	} {
		if got, ok := version.Parse(s); ok {
			t.Errorf("Parse(%q) = %+v; want refused", s, got)
		}
	}
}
