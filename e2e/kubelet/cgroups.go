package kubelet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/nicpool/nicpool/e2e/fabric"
)

// cgroupMount is where this kind of host mounts its cgroup hierarchies.
const cgroupMount = "/sys/fs/cgroup"

// RemoveCgroups removes the cgroup root of a node in every hierarchy, deepest first.
// runc removes a container's cgroup when the container is deleted; a node that was
// killed leaves them, empty once its processes are gone.
func RemoveCgroups(root string) error {
	if root == "" || root == "/" {
		return nil
	}
	hierarchies, err := os.ReadDir(cgroupMount)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // no cgroup hierarchy mounted: nothing was made
	case err != nil:
		return err
	}
	var errs []error
	for _, h := range hierarchies {
		dir := filepath.Join(cgroupMount, h.Name(), root)
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Cgroups lists the cgroups whose name starts with prefix, directly under the root
// of any hierarchy: what a sweep removes, what a test expects gone.
func Cgroups(prefix string) []string {
	hierarchies, _ := os.ReadDir(cgroupMount)
	var out []string
	for _, h := range hierarchies {
		entries, _ := os.ReadDir(filepath.Join(cgroupMount, h.Name()))
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, filepath.Join(h.Name(), e.Name()))
			}
		}
	}
	return out
}

// SweepCgroups removes the pods' cgroups of real nodes whose run is gone: each node's
// cgroup root is named after its network namespace, which names the run's process.
func SweepCgroups() error {
	seen := map[string]bool{}
	var errs []error
	for _, c := range Cgroups(fabric.NamespacePrefix) {
		name := filepath.Base(c)
		if seen[name] {
			continue
		}
		seen[name] = true
		var pid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(name, fabric.NamespacePrefix), "%d-", &pid); err != nil || alive(pid) {
			continue
		}
		errs = append(errs, RemoveCgroups("/"+name))
	}
	return errors.Join(errs...)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ContainerCgroups are the cgroups of the node's containers, from the OCI specs
// containerd keeps in its state directory. With per-QoS cgroups off the kubelet names
// no cgroup parent, so containerd puts each container in /k8s.io/<id>, outside the
// node's cgroup root: a node that is killed leaves them (empty) unless removed.
func (n *Node) ContainerCgroups() []string {
	specs, _ := filepath.Glob(filepath.Join(n.cfg.Root, "run/containerd/io.containerd.runtime.v2.task/*/*/config.json"))
	var out []string
	for _, f := range specs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var spec struct {
			Linux struct {
				CgroupsPath string `json:"cgroupsPath"`
			} `json:"linux"`
		}
		if json.Unmarshal(data, &spec) == nil && strings.HasPrefix(spec.Linux.CgroupsPath, "/") {
			out = append(out, spec.Linux.CgroupsPath)
		}
	}
	return out
}

// CgroupExists lists the hierarchies in which the cgroup path exists.
func CgroupExists(path string) []string {
	hierarchies, _ := os.ReadDir(cgroupMount)
	var out []string
	for _, h := range hierarchies {
		if _, err := os.Lstat(filepath.Join(cgroupMount, h.Name(), path)); err == nil {
			out = append(out, filepath.Join(h.Name(), path))
		}
	}
	return out
}
