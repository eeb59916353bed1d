// Package install puts the CNI plugin into a node's CNI bin directory. The ipamd
// DaemonSet's init container runs it as `nicpool install --dir=DIR NAME...`: the
// plugin's image carries no shell, so the plugin copies itself.
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

// Main runs `nicpool install` with args (those after "install") and returns the exit code.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("nicpool install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the node's CNI bin directory (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: nicpool install --dir=DIR [NAME...]   copies this plugin into DIR as each NAME (default nicpool)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "nicpool install: --dir is required: the node's CNI bin directory, e.g. --dir=/host/opt/cni/bin")
		return 2
	}
	names := fs.Args()
	if len(names) == 0 {
		names = []string{"nicpool"}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "nicpool install:", err)
		return 1
	}
	if err := Install(self, *dir, names...); err != nil {
		fmt.Fprintln(stderr, "nicpool install:", err)
		return 1
	}
	for _, n := range names {
		fmt.Fprintf(stderr, "installed %s\n", filepath.Join(*dir, n))
	}
	return 0
}

// Install copies the executable src into dir as each of names. Each copy is written to
// a hidden file beside its target, synced and renamed over it: the runtime never
// executes a half-written plugin, and a runtime still running the old binary keeps it.
func Install(src, dir string, names ...string) error {
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
	for _, n := range names {
		if err := installOne(src, dir, n); err != nil {
			return fmt.Errorf("install %s into %s: %w", n, dir, err)
		}
	}
	return nil
}

func checkName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') || strings.HasPrefix(n, ".") {
		return fmt.Errorf("plugin name %q: want a plain file name such as nicpool (no '/', not hidden)", n)
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
