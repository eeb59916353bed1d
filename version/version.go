// Package version is the version of nicpool's binaries: one release version and git
// revision for all of them, stamped at link time by the Makefile and the Dockerfiles
//
//	go build -ldflags "-X github.com/nicpool/nicpool/version.version=v0.1.0 -X github.com/nicpool/nicpool/version.revision=<commit>"
//
// (`make build VERSION=...`; the default is `git describe --tags --always --dirty`).
// A binary built without them (`go build`, `go run`, `go install ...@v0.1.0`) reports
// what Go's build information knows: the module version when installed from the
// module proxy, the VCS revision when built in a git checkout, else "dev".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-X); empty in a plain `go build`.
var (
	version  string
	revision string
)

// Unknown stands for a version or revision nobody stamped.
const (
	Dev             = "dev"
	UnknownRevision = "unknown"
)

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the release version (v0.1.0), or git describe's output for a build
	// between releases (v0.1.0-3-gabcdef0-dirty), or "dev".
	Version string `json:"version"`
	// Revision is the git commit the binary was built from, or "unknown".
	Revision string `json:"revision"`
	// GoVersion is the Go toolchain that built it (go1.26.0).
	GoVersion string `json:"goVersion"`
}

// Get returns this binary's build information.
func Get() Info {
	i := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Revision == "" {
				i.Revision = s.Value
			}
		}
	}
	if i.Version == "" {
		i.Version = Dev
	}
	if i.Revision == "" {
		i.Revision = UnknownRevision
	}
	return i
}

// String is the one line `--version` prints after the program's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// Parse reads a line String wrote back into the Info it was written from; ok is false
// for anything String does not write.
func Parse(s string) (i Info, ok bool) {
	v, detail, found := strings.Cut(s, " (revision ")
	if !found {
		return Info{}, false
	}
	detail, closed := strings.CutSuffix(detail, ")")
	rev, goVersion, comma := strings.Cut(detail, ", ")
	if !closed || !comma || v == "" || strings.Contains(v, " ") || rev == "" || goVersion == "" {
		return Info{}, false
	}
	return Info{Version: v, Revision: rev, GoVersion: goVersion}, true
}

// Line is what a binary's --version prints: its name, then Get().String().
func Line(program string) string { return program + " " + Get().String() }

// LabelKey is the label that carries a binary's version on the objects it keeps for
// itself (ipamd's heartbeat Lease): `kubectl nicpool version` reads it.
const LabelKey = "app.kubernetes.io/version"

// Label is v as a label value: at most 63 characters of letters, digits, '-', '_'
// and '.', beginning and ending with a letter or digit. Any other character (the
// '+' of a Go pseudo-version's "+dirty") becomes '_'.
func Label(v string) string {
	b := []byte(v)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for len(b) > 0 && !alnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !alnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return Dev
	}
	return string(b)
}
