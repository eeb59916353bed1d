package cniplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nicpool/nicpool/cniplugin/cni"
)

// Environment variables that say where the plugin's directories (cni.RunDir and
// cni.LogDir) are on this host when they are elsewhere (tests, several node
// stand-ins on one host). Configurations still name paths under them. The plugin's
// environment is the container runtime's: no network configuration and no pod can
// set it.
const (
	EnvRunDir = "NICPOOL_CNI_RUN_DIR"
	EnvLogDir = "NICPOOL_CNI_LOG_DIR"
)

// maxLogSize is when the log file is rotated (to one ".1" backup): every CNI call of
// the node appends to it, and nothing else would ever trim it.
const maxLogSize = 10 << 20

// hostDir is one of the plugin's directories: the name configurations use, and where
// it is on this host.
type hostDir struct {
	name string
	path string
}

func runDir() hostDir { return locate(cni.RunDir, EnvRunDir) }
func logDir() hostDir { return locate(cni.LogDir, EnvLogDir) }

func locate(name, env string) hostDir {
	if p := os.Getenv(env); p != "" && filepath.IsAbs(p) {
		return hostDir{name: name, path: filepath.Clean(p)}
	}
	return hostDir{name: name, path: name}
}

func refusal(path, why string) error { return &cni.RefusedPath{Path: path, Why: why} }

// openParent opens the directory that holds rel, one component at a time from the
// directory itself, following no symlink; mkdir creates missing directories on the
// way. It returns the directory and rel's last component. (openat2's
// RESOLVE_NO_SYMLINKS does the same in one call, but only from Linux 5.6; nodes run
// older kernels.)
func (d hostDir) openParent(rel string, mkdir bool) (int, string, error) {
	fd, err := unix.Open(d.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOTDIR || err == unix.ELOOP {
			return -1, "", refusal(d.name, "is not a directory (a symlink is not followed)")
		}
		return -1, "", fmt.Errorf("open %s: %w", d.name, err)
	}
	parts := strings.Split(rel, "/")
	walked := d.name
	for _, part := range parts[:len(parts)-1] {
		walked += "/" + part
		if mkdir {
			if err := unix.Mkdirat(fd, part, 0o755); err != nil && err != unix.EEXIST {
				_ = unix.Close(fd)
				return -1, "", fmt.Errorf("create %s: %w", walked, err)
			}
		}
		next, err := unix.Openat(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		_ = unix.Close(fd)
		if err != nil {
			if err == unix.ENOTDIR || err == unix.ELOOP {
				return -1, "", refusal(walked, "is not a directory (a symlink is not followed)")
			}
			return -1, "", fmt.Errorf("open %s: %w", walked, err)
		}
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// dial connects to the unix socket rel beneath the directory. The socket is opened
// first (O_PATH, no symlink followed) and connected to through that descriptor, so
// what is connected to is what was checked.
func (d hostDir) dial(ctx context.Context, rel string) (net.Conn, error) {
	name := d.name + "/" + rel
	dir, base, err := d.openParent(rel, false)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat(dir, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	_ = unix.Close(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
	case unix.S_IFLNK:
		return nil, refusal(name, "is a symlink, which is not followed")
	default:
		return nil, refusal(name, "is not a unix socket")
	}
	var dl net.Dialer
	conn, err := dl.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		// Name the socket as configured, not the descriptor it was reached through.
		var sys *os.SyscallError
		if errors.As(err, &sys) {
			err = sys.Err
		}
		return nil, fmt.Errorf("connect %s: %w", name, err)
	}
	return conn, nil
}

// appendTo opens the file rel beneath the directory for appending, creating it and
// its directories as needed. It follows no symlink, and refuses anything but a
// regular file with one link (a hard link would let the directory's writers aim the
// log at any file of the same filesystem). A file grown past maxLogSize is first
// renamed to rel.1 in the same directory.
func (d hostDir) appendTo(rel string) (*os.File, error) {
	name := d.name + "/" + rel
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", d.name, err)
	}
	if !cni.ShallowLogPath(rel) {
		return nil, refusal(name, "is more than one directory beneath "+d.name)
	}
	dir, base, err := d.openParent(rel, true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	for rotated := false; ; rotated = true {
		// O_NONBLOCK: opening a FIFO planted in the directory must not hang the plugin.
		fd, err := unix.Openat(dir, base, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
		switch {
		case err == unix.ELOOP:
			return nil, refusal(name, "is a symlink, which is not followed")
		case err == unix.ENXIO || err == unix.EISDIR:
			return nil, refusal(name, "is not a regular file")
		case err != nil:
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("stat %s: %w", name, err)
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			_ = unix.Close(fd)
			return nil, refusal(name, "is not a regular file")
		case st.Nlink > 1:
			_ = unix.Close(fd)
			return nil, refusal(name, "has other hard links")
		case st.Size > maxLogSize && !rotated:
			// Concurrent plugins may race to rotate; losing a few lines is acceptable.
			_ = unix.Close(fd)
			_ = unix.Renameat(dir, base, dir, base+".1")
			continue
		}
		if err := unix.SetNonblock(fd, false); err != nil {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// dialSocket connects to socket, the configured ipamd socket (beneath cni.RunDir).
func dialSocket(ctx context.Context, socket string) (net.Conn, error) {
	rel, ok := cni.Beneath(cni.RunDir, socket)
	if !ok {
		return nil, refusal(fmt.Sprintf("%.200q", socket), "is not beneath "+cni.RunDir)
	}
	return runDir().dial(ctx, rel)
}
