package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/fabric"
	"github.com/nicpool/nicpool/e2e/kubelet"
)

const pidFile = "pid"

// up starts `run` as a background process of its own session, logging to
// state-dir/run.log, and returns once it has written the ready file.
func up(dir string, nodes int, kind string) error {
	if pid, ok := runningPid(dir); ok {
		return fmt.Errorf("already running (pid %d); `make down` stops it", pid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, readyFile))
	logPath := filepath.Join(dir, "run.log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "run", "--detached", "--state-dir", dir, "--nodes", strconv.Itoa(nodes), "--node", kind)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(10 * time.Minute)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("local cluster exited before it was ready (%w):\n%s", err, out)
		case <-deadline:
			return fmt.Errorf("local cluster not ready after 10 minutes; see %s", logPath)
		case <-tick.C:
			if _, err := os.Stat(filepath.Join(dir, readyFile)); err == nil {
				out, _ := os.ReadFile(logPath)
				fmt.Print(string(out))
				fmt.Printf("running in the background (pid %d, log %s); `make down` stops it\n", cmd.Process.Pid, display(logPath))
				return nil
			}
		}
	}
}

// down stops the background cluster and waits for it to clean up; it then removes
// network namespaces of any crashed run.
func down(dir string) error {
	pid, ok := runningPid(dir)
	if !ok {
		fmt.Println("no local cluster running")
		return sweep()
	}
	report := filepath.Join(dir, leftoversFile)
	_ = os.Remove(report)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // polling another process's exit; nothing to wait on
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = os.Remove(filepath.Join(dir, pidFile))
	fmt.Printf("stopped local cluster (pid %d)\n", pid)
	if err := sweep(); err != nil {
		return err
	}
	left, err := os.ReadFile(report)
	if err != nil {
		return fmt.Errorf("the cluster did not report what it left behind (killed?): %w; see %s", err, display(filepath.Join(dir, "run.log")))
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind after stopping:\n%s", left)
	}
	fmt.Println("nothing left behind: no process, network namespace, cgroup or mount of the cluster")
	return nil
}

// sweep removes what a run that was killed left behind: network namespaces and
// control-plane processes.
func sweep() error {
	return errors.Join(fabric.Sweep(), cluster.SweepProcesses(), kubelet.SweepCgroups())
}

func runningPid(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !alive(pid) {
		return 0, false
	}
	return pid, true
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
