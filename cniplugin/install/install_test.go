package install

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func plugin(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nicpool")
	if err := os.WriteFile(p, []byte(content), 0o700); err != nil {
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

// The node's CNI bin directory ends with an executable copy under every name asked
// for, an old plugin replaced, another plugin untouched and no temporary file left.
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
	if err := Install(plugin(t, "new plugin"), dir, "nicpool", "spiderpool"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nicpool", "spiderpool"} {
		p := filepath.Join(dir, n)
		data, err := os.ReadFile(p)
		if err != nil || string(data) != "new plugin" {
			t.Errorf("%s holds %q (%v), want the new plugin", n, data, err)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v (%v), want 0755", n, st.Mode(), err)
		}
	}
	if got := strings.Join(entries(t, dir), " "); got != "macvlan nicpool spiderpool" {
		t.Errorf("the directory holds %s, want macvlan nicpool spiderpool", got)
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

// Main needs the directory and defaults the name; its errors say what to pass.
func TestMainNeedsTheDirectory(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main(nil, &stderr); code != 2 || !strings.Contains(stderr.String(), "--dir is required") {
		t.Errorf("no --dir: exit %d, %q", code, stderr.String())
	}
	dir := t.TempDir()
	stderr.Reset()
	if code := Main([]string{"--dir=" + dir}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := strings.Join(entries(t, dir), " "); got != "nicpool" {
		t.Errorf("default name: the directory holds %q, want nicpool", got)
	}
}
