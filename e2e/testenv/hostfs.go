package testenv

import (
	"bufio"
	"io/fs"
	"net"
	"os"
	"path/filepath"
)

// Snapshot describes every entry under dir (type and permissions, the content of
// files, the target of symlinks), so that a test can show that something it ran
// created, renamed, wrote or removed nothing there.
func Snapshot(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			desc += " " + string(data)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		out[path] = desc
		return nil
	})
	return out, err
}

// ConnectedTo says whether anything connected to l since it last accepted: a
// connection of our own queues behind whatever came before, so the first one
// accepted tells.
func ConnectedTo(l *net.UnixListener) (bool, error) {
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := c.Write([]byte("probe\n")); err != nil {
		return false, err
	}
	first, err := l.Accept()
	if err != nil {
		return false, err
	}
	defer first.Close()
	line, _ := bufio.NewReader(first).ReadString('\n')
	return line != "probe\n", nil
}
