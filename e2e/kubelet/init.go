package kubelet

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The node's init is the first process of the node's PID namespace, started by Node
// through nsenter (the node's network namespace) and unshare (new mount and PID
// namespaces). It gives the node its own /run, /var/lib, /var/log, /opt and an
// overlay over /etc, starts and stops the node's daemons on request, and reaps every
// orphan (container shims re-parent to it). When it ends, the kernel kills every
// process of the node, containers included: nothing outlives the node.
//
// Requests come one JSON object per line on its standard input, each answered by one
// line on its standard output; end of input stops the node.

// initRequest asks the init to start or stop a daemon.
type initRequest struct {
	Op   string   `json:"op"` // "start" or "stop"
	Name string   `json:"name"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Log is the daemon's log file, appended to.
	Log string `json:"log,omitempty"`
	// Signal stops the daemon (default SIGTERM); it is killed after Grace.
	Signal int           `json:"signal,omitempty"`
	Grace  time.Duration `json:"grace,omitempty"`
}

type initReply struct {
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// InitConfig is what the init needs before it serves requests.
type InitConfig struct {
	// Root holds the node's own directories, mounted over the host's.
	Root string
	// Hosts is the node's /etc/hosts.
	Hosts string
	// Sysctls are files of /proc/sys shown to the node with the given content instead
	// of the host's: the kubelet checks kernel tunables and sets them when they differ,
	// which would change the host's (they are not namespaced).
	Sysctls map[string]string
}

// nodeDirs are the host directories every node gets its own copy of: the runtime's
// and the kubelet's state, logs, CNI plugins.
var nodeDirs = []string{"/run", "/var/lib", "/var/log", "/opt"}

// RunInit is the node's init (`nicpool-local node-init`). It returns when its input
// ends, after stopping the daemons.
func RunInit(cfg InitConfig, in io.Reader, out io.Writer) error {
	if os.Getpid() != 1 {
		return errors.New("node-init must be the first process of a new PID namespace (unshare --pid --fork)")
	}
	if err := setupMounts(cfg); err != nil {
		return fmt.Errorf("node mounts: %w", err)
	}
	proc := &initProcess{daemons: map[string]*daemon{}, byPid: map[int]*daemon{}}
	go proc.reap()
	enc := json.NewEncoder(out)
	s := bufio.NewScanner(in)
	s.Buffer(make([]byte, 1<<16), 1<<20)
	for s.Scan() {
		var req initRequest
		reply := initReply{}
		if err := json.Unmarshal(s.Bytes(), &req); err != nil {
			reply.Error = err.Error()
		} else {
			reply = proc.handle(req)
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
	proc.stopAll()
	return s.Err()
}

func setupMounts(cfg InitConfig) error {
	// Nothing mounted here may reach the host's mount namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// A /proc of this PID namespace, so the node's daemons see only the node.
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, d := range nodeDirs {
		own := filepath.Join(cfg.Root, d)
		if err := os.MkdirAll(own, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(own, d, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", own, d, err)
		}
	}
	// /etc stays the host's (users, resolv.conf, ssl) with the node's own files on top.
	upper, work := filepath.Join(cfg.Root, "etc"), filepath.Join(cfg.Root, ".etc-work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := syscall.Mount("overlay", "/etc", "overlay", 0, fmt.Sprintf("lowerdir=/etc,upperdir=%s,workdir=%s", upper, work)); err != nil {
		return fmt.Errorf("overlay /etc: %w", err)
	}
	if err := os.WriteFile("/etc/hosts", []byte(cfg.Hosts), 0o644); err != nil {
		return err
	}
	sysctlDir := filepath.Join(cfg.Root, ".sysctl")
	if err := os.MkdirAll(sysctlDir, 0o755); err != nil {
		return err
	}
	for name, value := range cfg.Sysctls {
		file := filepath.Join(sysctlDir, strings.ReplaceAll(name, "/", "."))
		if err := os.WriteFile(file, []byte(value+"\n"), 0o444); err != nil {
			return err
		}
		target := filepath.Join("/proc/sys", name)
		if err := syscall.Mount(file, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("show %s as %s: %w", target, value, err)
		}
	}
	return nil
}

type daemon struct {
	name string
	pid  int
	done chan struct{}
}

type initProcess struct {
	mu      sync.Mutex
	daemons map[string]*daemon
	// byPid maps the pids this init started to their daemon, so the reaper can tell
	// a daemon's end from an orphan's.
	byPid map[int]*daemon
	// order is the order daemons were started in; they stop in reverse.
	order []string
}

// reap waits for every child, the daemons and the orphans re-parented to this
// process, and marks daemons that ended.
func (p *initProcess) reap() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	for range sigs {
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			p.mu.Lock()
			if d, ok := p.byPid[pid]; ok {
				delete(p.byPid, pid)
				if p.daemons[d.name] == d {
					delete(p.daemons, d.name)
				}
				close(d.done)
			}
			p.mu.Unlock()
		}
	}
}

func (p *initProcess) handle(req initRequest) initReply {
	switch req.Op {
	case "start":
		pid, err := p.start(req)
		if err != nil {
			return initReply{Error: err.Error()}
		}
		return initReply{Pid: pid}
	case "stop":
		if err := p.stop(req.Name, syscall.Signal(req.Signal), req.Grace); err != nil {
			return initReply{Error: err.Error()}
		}
		return initReply{}
	}
	return initReply{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

func (p *initProcess) start(req initRequest) (int, error) {
	if len(req.Argv) == 0 {
		return 0, errors.New("start: empty argv")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, running := p.daemons[req.Name]; running {
		return 0, fmt.Errorf("%s is running", req.Name)
	}
	log, err := os.OpenFile(req.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	// The reaper collects the exit, so the process is started without os/exec's Wait.
	proc, err := os.StartProcess(req.Argv[0], req.Argv, &os.ProcAttr{
		Env:   req.Env,
		Files: []*os.File{devnull, log, log},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", req.Name, err)
	}
	d := &daemon{name: req.Name, pid: proc.Pid, done: make(chan struct{})}
	_ = proc.Release()
	p.daemons[req.Name] = d
	p.order = append(p.order, req.Name)
	p.byPid[d.pid] = d
	return d.pid, nil
}

func (p *initProcess) stop(name string, sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	d, ok := p.daemons[name]
	p.mu.Unlock()
	if !ok {
		return nil
	}
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	_ = syscall.Kill(d.pid, sig)
	select {
	case <-d.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(d.pid, syscall.SIGKILL)
	<-d.done
	return nil
}

// stopAll stops the daemons in reverse order of start, giving each a few seconds.
func (p *initProcess) stopAll() {
	p.mu.Lock()
	names := p.order
	p.mu.Unlock()
	for i := len(names) - 1; i >= 0; i-- {
		name := names[i]
		_ = p.stop(name, syscall.SIGTERM, 5*time.Second)
	}
}
