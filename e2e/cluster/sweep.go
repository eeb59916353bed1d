package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// envtest starts etcd and kube-apiserver without tying them to this process's life,
// so a test binary killed by its timeout would leave them running. Each run records
// its child processes in a file named after its pid; the next run kills the recorded
// processes of runs that are gone.

func recordDir() string { return filepath.Join(os.TempDir(), "nicpool-e2e-processes") }

// recordChildren writes the pid and executable of every child of this process.
func recordChildren() error {
	if err := os.MkdirAll(recordDir(), 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || ParentOf(pid) != os.Getpid() {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
			fmt.Fprintf(&b, "%d %s\n", pid, exe)
		}
	}
	return os.WriteFile(filepath.Join(recordDir(), strconv.Itoa(os.Getpid())), []byte(b.String()), 0o644)
}

func forgetChildren() {
	_ = os.Remove(filepath.Join(recordDir(), strconv.Itoa(os.Getpid())))
}

// SweepProcesses kills the recorded processes of runs whose process has exited,
// when they still run the recorded executable.
func SweepProcesses() error {
	entries, err := os.ReadDir(recordDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		owner, err := strconv.Atoi(e.Name())
		if err != nil || syscall.Kill(owner, 0) == nil {
			continue
		}
		path := filepath.Join(recordDir(), e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			pidText, exe, ok := strings.Cut(s.Text(), " ")
			pid, err := strconv.Atoi(pidText)
			if !ok || err != nil {
				continue
			}
			if current, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && current == exe {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = f.Close()
		_ = os.Remove(path)
	}
	return nil
}

// ParentOf is the parent pid of pid, read from /proc; 0 when the process is gone.
func ParentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name in field 2 may contain spaces; fields after its ')' are plain.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// childNamed is the pid of this process's child running the executable name.
func childNamed(name string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || ParentOf(pid) != os.Getpid() {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && filepath.Base(exe) == name {
			return pid
		}
	}
	return 0
}
