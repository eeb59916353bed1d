// Package install puts the CNI plugin into a node's CNI bin directory. The plugin is
// a pair: the Go plugin nicpool-cni and its front, a small static C program that the
// runtime execs for every call and that execs nicpool-cni, found beside its own
// executable, for whatever it cannot serve itself. The ipamd DaemonSet's init container
// runs `nicpool-cni install --dir=DIR NAME...`: the image carries no shell, so the Go
// plugin copies itself and the front that ships beside it.
package install

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const (
	// GoPlugin is the file name of the Go plugin, the same in every directory that
	// holds the pair: the front execs it from the directory of its own executable.
	GoPlugin = "nicpool-cni"
	// Front is the file name the front ships under beside GoPlugin (bin/, the image)
	// and its default name in a CNI bin directory.
	Front = "nicpool"
)

// Main runs `nicpool-cni install` with args (those after "install") and returns the
// exit code.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(GoPlugin+" install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the node's CNI bin directory (required)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s install --dir=DIR [NAME...]   copies this plugin into DIR as %s, then its front (%s beside it) as each NAME (default %s)\n", GoPlugin, GoPlugin, Front, Front)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintf(stderr, "%s install: --dir is required: the node's CNI bin directory, e.g. --dir=/host/opt/cni/bin\n", GoPlugin)
		return 2
	}
	names := fs.Args()
	if len(names) == 0 {
		names = []string{Front}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "%s install: %v\n", GoPlugin, err)
		return 1
	}
	if err := Install(self, *dir, names...); err != nil {
		fmt.Fprintf(stderr, "%s install: %v\n", GoPlugin, err)
		return 1
	}
	for _, n := range append([]string{GoPlugin}, names...) {
		fmt.Fprintf(stderr, "installed %s\n", filepath.Join(*dir, n))
	}
	return 0
}

// Install copies the Go plugin goPlugin into dir as GoPlugin, then the front, the
// file Front beside goPlugin, into dir as each of names. The Go plugin goes first: a
// front is never installed without the plugin it falls back to. Each copy is written
// to a hidden file beside its target, synced and renamed over it: the runtime never
// executes a half-written plugin, and a runtime still running the old binary keeps it.
// A missing front fails before anything is written.
func Install(goPlugin, dir string, names ...string) error {
	for _, n := range names {
		if err := checkName(n); err != nil {
			return err
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("CNI bin directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("CNI bin directory %s is not a directory", dir)
	}
	front := filepath.Join(filepath.Dir(goPlugin), Front)
	for _, src := range []string{goPlugin, front} {
		st, err := os.Stat(src)
		if err == nil && !st.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			return fmt.Errorf("%s is missing: the plugin ships as the pair %s and %s in one directory: %w", src, GoPlugin, Front, err)
		}
	}
	if err := installOne(goPlugin, dir, GoPlugin); err != nil {
		return fmt.Errorf("install %s into %s: %w", GoPlugin, dir, err)
	}
	for _, n := range names {
		if err := installOne(front, dir, n); err != nil {
			return fmt.Errorf("install %s into %s: %w", n, dir, err)
		}
	}
	return nil
}

// checkName refuses a name that is not a plain file of the directory, and GoPlugin:
// the front installed over the Go plugin would exec itself.
func checkName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') || strings.HasPrefix(n, ".") {
		return fmt.Errorf("plugin name %q: want a plain file name such as %s (no '/', not hidden)", n, Front)
	}
	if n == GoPlugin {
		return fmt.Errorf("plugin name %q: that is the Go plugin's own name; the front is installed under the names the networks' \"type\" use, such as %s", n, Front)
	}
	return nil
}

func installOne(src, dir, name string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := filepath.Join(dir, "."+name+".new")
	// A leftover of an interrupted install is ours to replace; never follow a link.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(0o755)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
