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
)

// The only host directories the plugin reaches. A network configuration is written by
// whoever may create a NetworkAttachmentDefinition and read by a plugin running as
// root, so the paths it names are confined to these two, and no symlink is followed
// inside them.
const (
	// RunDir holds ipamd's socket: ipam_unix_socket_path must name a file beneath it.
	RunDir = "/run/nicpool"
	// LogDir holds the plugin's logs: log_file_path must name a file beneath it.
	LogDir = "/var/log/nicpool"
)

// Environment variables that say where RunDir and LogDir are on this host when they
// are elsewhere (tests, several node stand-ins on one host). Configurations still
// name paths under RunDir and LogDir. The plugin's environment is the container
// runtime's: no network configuration and no pod can set it.
const (
	EnvRunDir = "NICPOOL_CNI_RUN_DIR"
	EnvLogDir = "NICPOOL_CNI_LOG_DIR"
)

// maxPathLen bounds a configured path (the kernel's PATH_MAX).
const maxPathLen = 4096

// maxLogName bounds each name of log_file_path beneath LogDir (the kernel's NAME_MAX).
const maxLogName = 255

// shallowLogPath reports whether rel, a path beneath LogDir, names a file in LogDir or
// in one subdirectory of it, each name at most maxLogName bytes. The plugin runs as
// root and creates the subdirectory when it is missing: a deeper path would let a
// network configuration create a directory per component on the filesystem the
// kubelet and the container runtime share, at every call.
func shallowLogPath(rel string) bool {
	parts := strings.Split(rel, "/")
	if len(parts) > 2 {
		return false
	}
	for _, part := range parts {
		if len(part) > maxLogName {
			return false
		}
	}
	return true
}

// hostDir is one of the plugin's directories: the name configurations use, and where
// it is on this host.
type hostDir struct {
	name string
	path string
}

func runDir() hostDir { return locate(RunDir, EnvRunDir) }
func logDir() hostDir { return locate(LogDir, EnvLogDir) }

func locate(name, env string) hostDir {
	if p := os.Getenv(env); p != "" && filepath.IsAbs(p) {
		return hostDir{name: name, path: filepath.Clean(p)}
	}
	return hostDir{name: name, path: name}
}

// beneath returns p relative to dir when p names a file beneath dir, judged on the
// text alone (".." is resolved lexically, which is what the kernel does too once no
// symlink may be followed).
func beneath(dir, p string) (string, bool) {
	if !filepath.IsAbs(p) || len(p) > maxPathLen {
		return "", false
	}
	rel, ok := strings.CutPrefix(filepath.Clean(p), dir+"/")
	return rel, ok && rel != ""
}

// refusedPath is a path the plugin will not use: it crosses a symlink, or names
// something other than what its key asks for. It names the path as the configuration
// does.
type refusedPath struct{ path, why string }

func (e *refusedPath) Error() string { return e.path + " " + e.why }

func refusal(path, why string) error { return &refusedPath{path: path, why: why} }

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
	if !shallowLogPath(rel) {
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

// dial connects to the configured ipamd socket.
func (c *Config) dial(ctx context.Context) (net.Conn, error) {
	rel, ok := beneath(RunDir, c.SocketPath)
	if !ok {
		return nil, refusal(fmt.Sprintf("%.200q", c.SocketPath), "is not beneath "+RunDir)
	}
	return runDir().dial(ctx, rel)
}
