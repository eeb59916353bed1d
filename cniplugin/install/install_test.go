package install

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plugin writes a stand-in of the shipped pair, as bin/ and the image hold it: the
// Go plugin (content "go <version>") and the front beside it ("front <version>").
// It returns the Go plugin's path.
func plugin(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, Front), []byte("front "+version), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, GoPlugin)
	if err := os.WriteFile(p, []byte("go "+version), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// The node's CNI bin directory ends with the Go plugin as nicpool-cni and the front
// under every name asked for, executable, an old plugin replaced, another plugin
// untouched and no temporary file left.
func TestInstallCopiesUnderEveryName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nicpool"), []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "macvlan"), []byte("macvlan"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A leftover of an install killed half-way.
	if err := os.WriteFile(filepath.Join(dir, ".nicpool.new"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Install(plugin(t, "v2"), dir, "nicpool", "spiderpool"); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]string{"nicpool-cni": "go v2", "nicpool": "front v2", "spiderpool": "front v2"} {
		p := filepath.Join(dir, n)
		data, err := os.ReadFile(p)
		if err != nil || string(data) != want {
			t.Errorf("%s holds %q (%v), want %q", n, data, err, want)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v (%v), want 0755", n, st.Mode(), err)
		}
	}
	if got := strings.Join(entries(t, dir), " "); got != "macvlan nicpool nicpool-cni spiderpool" {
		t.Errorf("the directory holds %s, want macvlan nicpool nicpool-cni spiderpool", got)
	}
}

// A node never runs a front without the Go plugin it falls back to: nicpool-cni is
// in place (and new) before the first front is renamed into place. The front of the
// previous install, still executing, finds the new Go plugin beside it.
func TestInstallPutsTheGoPluginFirst(t *testing.T) {
	dir := t.TempDir()
	src := plugin(t, "v2")
	// A directory in the way of the front's temporary copy fails that copy.
	if err := os.MkdirAll(filepath.Join(dir, ".nicpool.new", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Install(src, dir, "nicpool"); err == nil {
		t.Fatal("the front's copy did not fail")
	}
	if data, err := os.ReadFile(filepath.Join(dir, GoPlugin)); err != nil || string(data) != "go v2" {
		t.Errorf("after a failed front, %s holds %q (%v); want the Go plugin installed first", GoPlugin, data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nicpool")); err == nil {
		t.Error("a front was installed although its copy failed")
	}
}

// A Go plugin shipped without its front is an error naming the missing file, and
// nothing is written: a node keeps the pair it had.
func TestInstallNeedsTheFront(t *testing.T) {
	dir := t.TempDir()
	src := plugin(t, "v2")
	front := filepath.Join(filepath.Dir(src), Front)
	if err := os.Remove(front); err != nil {
		t.Fatal(err)
	}
	err := Install(src, dir, "nicpool")
	if err == nil || !strings.Contains(err.Error(), front) || !strings.Contains(err.Error(), "pair") {
		t.Errorf("Install without a front: %v; want an error naming %s", err, front)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("Install without a front wrote %v", got)
	}
}

// A link planted where the temporary copy goes is replaced, never written through.
func TestInstallDoesNotFollowALinkAtTheTemporaryName(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	victim := filepath.Join(elsewhere, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, ".nicpool.new")); err != nil {
		t.Fatal(err)
	}
	if err := Install(plugin(t, "plugin"), dir, "nicpool"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "keep" {
		t.Errorf("the link's target was written: %q", data)
	}
}

func TestInstallRefuses(t *testing.T) {
	src := plugin(t, "plugin")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir   string
		names []string
		want  string
	}{
		{t.TempDir(), []string{"../nicpool"}, `plugin name "../nicpool"`},
		{t.TempDir(), []string{"sub/nicpool"}, `plugin name "sub/nicpool"`},
		{t.TempDir(), []string{".nicpool"}, `plugin name ".nicpool"`},
		{t.TempDir(), []string{""}, `plugin name ""`},
		{t.TempDir(), []string{"nicpool", "nicpool-cni"}, `plugin name "nicpool-cni": that is the Go plugin's own name`},
		{filepath.Join(t.TempDir(), "missing"), []string{"nicpool"}, "CNI bin directory"},
		{file, []string{"nicpool"}, "is not a directory"},
	} {
		err := Install(src, tc.dir, tc.names...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Install(%s, %q): got %v, want an error with %q", tc.dir, tc.names, err, tc.want)
		}
		if st, serr := os.Stat(tc.dir); serr == nil && st.IsDir() && len(entries(t, tc.dir)) != 0 {
			t.Errorf("Install(%s, %q) wrote %v", tc.dir, tc.names, entries(t, tc.dir))
		}
	}
}

// Main needs the directory; its errors say what to pass. Run from a binary with no
// front beside it (this test), it names the missing front and installs nothing (the
// default names are tested on the built pair, in cmd/nicpool-cni).
func TestMainNeedsTheDirectoryAndTheFront(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main(nil, &stderr); code != 2 || !strings.Contains(stderr.String(), "--dir is required") {
		t.Errorf("no --dir: exit %d, %q", code, stderr.String())
	}
	dir := t.TempDir()
	stderr.Reset()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	front := filepath.Join(filepath.Dir(self), Front)
	if code := Main([]string{"--dir=" + dir}, &stderr); code != 1 || !strings.Contains(stderr.String(), "nicpool-cni install: "+front+" is missing") {
		t.Errorf("no front beside the binary: exit %d, %q; want 1 and the front's path", code, stderr.String())
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("the directory holds %v, want nothing", got)
	}
}
