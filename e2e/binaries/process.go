package binaries

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Process is one running binary. Its output goes to a log file, whose end failures
// quote.
type Process struct {
	Name string
	// Env is what was added to this process's environment for it.
	Env []string
	Log string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // valid once exited is closed
	stop   sync.Once
}

// Start runs bin with args and env added to this process's environment, its output
// going to logPath. The child is killed when this process dies, so a test binary
// killed by its timeout leaves no daemon behind.
func Start(name, bin string, env []string, logPath string, args ...string) (*Process, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Env: env, Log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop sends SIGTERM, waits up to grace for the process to exit and kills it then.
// Stopping a process that has ended, or stopping twice, does nothing.
func (p *Process) Stop(grace time.Duration) {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// ExitError says how the process ended; call it once Exited is closed.
func (p *Process) ExitError() error {
	if p.err == nil {
		return fmt.Errorf("%s exited with status 0", p.Name)
	}
	return fmt.Errorf("%s exited: %w", p.Name, p.err)
}

// Alive is nil while the process runs, else how it ended and the end of its log.
func (p *Process) Alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%w\n--- end of %s's log ---\n%s", p.ExitError(), p.Name, p.Tail())
	default:
		return nil
	}
}

// Tail is the last 4 KiB of the process's log.
func (p *Process) Tail() string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// WaitFor polls cond until it holds. It fails when the process exits first or the
// timeout passes, with cond's last error and the end of the log.
func (p *Process) WaitFor(what string, timeout time.Duration, cond func(context.Context) error) error {
	last := errors.New("not checked yet")
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, p.ExitError()
		default:
		}
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s %s: %w (last: %w)\n--- end of %s's log ---\n%s", p.Name, what, err, last, p.Name, p.Tail())
	}
	return nil
}

// Memory is what /proc/<pid>/status says of a process, in bytes: the resident set
// now (RSS), its peak (HWM), and the now split into anonymous memory (heap, stacks)
// and mapped files (the binary's own pages).
type Memory struct{ RSS, HWM, Anon, File int64 }

// Memory reads the process's resident memory.
func (p *Process) Memory() (Memory, error) { return ReadMemory(p.Pid()) }

// ReadMemory reads /proc/<pid>/status.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text()) // "VmRSS:   12345 kB"
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			m.RSS = kb << 10
		case "VmHWM:":
			m.HWM = kb << 10
		case "RssAnon:":
			m.Anon = kb << 10
		case "RssFile:":
			m.File = kb << 10
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return m, s.Err()
}

// CPUSeconds is the CPU time, user and system, the process has used so far.
func (p *Process) CPUSeconds() (float64, error) { return ReadCPUSeconds(p.Pid()) }

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// ReadCPUSeconds reads utime and stime from /proc/<pid>/stat.
func ReadCPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name in field 2 may hold spaces; the fields after its ')' are
	// plain: state is the first, utime and stime the 12th and 13th.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat has %d fields after the name", pid, len(fields))
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return (utime + stime) / clockTicks, nil
}

// FreeAddr is a loopback address whose port is free right now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
