package local

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/fabric"
	"github.com/nicpool/nicpool/e2e/kubelet"
)

// footprint is what a stack started, remembered so that Leftovers can tell after Down
// whether any of it is still there.
type footprint struct {
	// processes are this process's children (control plane, nicpool's processes,
	// the nodes' inits), by pid and start time.
	processes map[int]string
	// namespaces are the real nodes' own namespaces and the fabric's network
	// namespace, as /proc/PID/ns links read.
	namespaces map[string]bool
	// cgroups are the real nodes' cgroup roots and their containers' cgroups.
	cgroups []string
}

// remember adds what runs now to the footprint: called once the stack is up and
// again before it stops (a restarted API server is a new child).
func (s *Stack) remember() {
	if s.footprint.processes == nil {
		s.footprint.processes = map[int]string{}
		s.footprint.namespaces = map[string]bool{}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || cluster.ParentOf(pid) != os.Getpid() {
			continue
		}
		if id := processIdentity(pid); id != "" {
			s.footprint.processes[pid] = id
		}
	}
	if s.Fabric != nil {
		// A named network namespace is a bind mount of its nsfs file: same inode.
		var st syscall.Stat_t
		if err := syscall.Stat(s.Fabric.Path(), &st); err == nil {
			s.footprint.namespaces[fmt.Sprintf("net:[%d]", st.Ino)] = true
		}
	}
	for _, n := range s.Kubelets {
		for _, ns := range n.Namespaces() {
			s.footprint.namespaces[ns] = true
		}
		for _, c := range append(n.ContainerCgroups(), n.CgroupRoot()) {
			if !slices.Contains(s.footprint.cgroups, c) {
				s.footprint.cgroups = append(s.footprint.cgroups, c)
			}
		}
	}
}

// Leftovers lists what a stack that was stopped (Down) left behind: processes it
// started or that run in its nodes' namespaces or cgroups, its network namespaces,
// its nodes' cgroups, mounts beneath its directory. Empty after a clean Down.
func (s *Stack) Leftovers() []string {
	var out []string
	for _, ns := range fabric.Leftovers() {
		out = append(out, "network namespace "+ns)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if why := s.footprint.holds(pid); why != "" {
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
			out = append(out, fmt.Sprintf("process %d (%s): %s", pid, exe, why))
		}
	}
	for _, c := range s.footprint.cgroups {
		for _, in := range kubelet.CgroupExists(c) {
			out = append(out, "cgroup "+in)
		}
	}
	for _, m := range mountsBeneath(s.Dir) {
		out = append(out, "mount "+m)
	}
	return out
}

// holds says why a process belongs to the footprint, or "".
func (f footprint) holds(pid int) string {
	if id, ok := f.processes[pid]; ok && processIdentity(pid) == id {
		return "started by this stack"
	}
	if len(f.cgroups) > 0 {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		for _, root := range f.cgroups {
			if strings.Contains(string(data), ":"+root+"/") || strings.Contains(string(data), ":"+root+"\n") {
				return "in a cgroup of a node (" + root + ")"
			}
		}
	}
	for _, kind := range []string{"mnt", "pid", "net"} {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind)); err == nil && f.namespaces[link] {
			return "in a namespace of the stack (" + link + ")"
		}
	}
	return ""
}

// processIdentity is a process's executable and start time: what tells it from a
// later process with the same pid.
func processIdentity(pid int) string {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// Fields after the command (which may hold spaces): the 22nd field is the start time.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) < 20 {
		return ""
	}
	return exe + " " + fields[19]
}

// mountsBeneath lists the mount points of this process's mount namespace beneath dir.
func mountsBeneath(dir string) []string {
	if dir == "" {
		return nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := fields[4]
		if mp == dir || strings.HasPrefix(mp, filepath.Clean(dir)+"/") {
			out = append(out, mp)
		}
	}
	return out
}
