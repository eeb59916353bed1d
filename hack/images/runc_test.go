package images_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nicpool/nicpool/cniplugin/install"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/hack/images"
	"github.com/nicpool/nicpool/manifests"
)

// tarballs are the images of this package's tests, built as `make images` does
// (static binaries, the host's platform) by TestMain from the binaries in binDir.
var (
	tarballs = map[string]string{}
	binDir   string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nicpool-images-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		if err := buildImages(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildImages(dir string) error {
	bin := filepath.Join(dir, "bin")
	binDir = bin
	// The plugin's image carries the pair, built by the one helper that builds it.
	if _, err := binaries.BuildPlugin(bin); err != nil {
		return err
	}
	pkgs := map[string]string{"pause": "./hack/images/pause"}
	for _, im := range images.Product {
		if im.Binary != install.GoPlugin {
			pkgs[im.Binary] = "./cmd/" + im.Binary
		}
	}
	for binary, pkg := range pkgs {
		// The flags of the Makefile's GO_BUILD, so that `make test` reuses what
		// `make build` compiled.
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(bin, binary), pkg)
		build.Dir = testenv.RepoRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
	}
	// The busybox image's binary is Debian's, as `make spiderpool-image` fetches it.
	fetch := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "images", "busybox.sh"), testenv.BinDir(), bin)
	if out, err := fetch.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/images/busybox.sh: %w\n%s", err, out)
	}
	var names []string
	for _, im := range images.All() {
		names = append(names, im.Name)
	}
	built, err := images.Build(images.Options{
		BinDir: bin, OutDir: filepath.Join(dir, "images"), Names: names,
		Platforms: []string{images.HostPlatform().String()},
	})
	if err != nil {
		return err
	}
	for _, b := range built {
		tarballs[b.Name] = b.Path
	}
	return nil
}

// unpack writes the host platform's image of a tarball to a bundle's rootfs.
func unpack(t *testing.T, name, rootfs string) *v1.ConfigFile {
	t.Helper()
	_, idx, err := images.Load(tarballs[name], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, err := images.ImageFor(idx, images.HostPlatform())
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if err := images.Unpack(rc, rootfs); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

// container is what the test runs: the image's config, then what a pod spec overrides.
type container struct {
	image   string
	command []string // replaces the entrypoint, as a pod's command does
	args    []string
	uid     *int64 // runAsUser, else the image's USER
	binds   map[string]string
}

type mount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

// bundle writes an OCI bundle: the image's rootfs and a minimal runtime spec confined
// like the manifests' containers (read-only root, no capabilities, no new privileges,
// own namespaces).
func bundle(t *testing.T, c container) string {
	t.Helper()
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	cf := unpack(t, c.image, rootfs)
	args := append(slicesOr(c.command, cf.Config.Entrypoint), slicesOr(c.args, cf.Config.Cmd)...)
	if c.command != nil && c.args == nil {
		args = c.command
	}
	uid, gid := userOf(t, cf.Config.User)
	if c.uid != nil {
		uid, gid = *c.uid, *c.uid
	}
	mounts := []mount{
		{"/proc", "proc", "proc", nil},
		{"/dev", "tmpfs", "tmpfs", []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"/dev/pts", "devpts", "devpts", []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{"/dev/shm", "tmpfs", "shm", []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"/sys", "sysfs", "sysfs", []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	for dst, src := range c.binds {
		mounts = append(mounts, mount{dst, "bind", src, []string{"rbind", "rw"}})
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal":        false,
			"user":            map[string]any{"uid": uid, "gid": gid},
			"args":            args,
			"env":             cf.Config.Env,
			"cwd":             "/",
			"capabilities":    map[string]any{"bounding": []string{}, "effective": []string{}, "permitted": []string{}},
			"noNewPrivileges": true,
		},
		"root":     map[string]any{"path": "rootfs", "readonly": true},
		"hostname": "nicpool-image-test",
		"mounts":   mounts,
		"linux": map[string]any{
			"namespaces":    []map[string]string{{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
			"maskedPaths":   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func slicesOr(a, b []string) []string {
	if a != nil {
		return a
	}
	return b
}

func userOf(t *testing.T, user string) (int64, int64) {
	t.Helper()
	if user == "" {
		return 0, 0
	}
	u, g, _ := strings.Cut(user, ":")
	uid, err := strconv.ParseInt(u, 10, 64)
	if err != nil {
		t.Fatalf("image USER %q is not numeric: a pod's runAsNonRoot cannot check it", user)
	}
	gid := uid
	if g != "" {
		if gid, err = strconv.ParseInt(g, 10, 64); err != nil {
			t.Fatalf("image USER %q: group is not numeric", user)
		}
	}
	return uid, gid
}

func runcBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(testenv.BinDir(), "runc")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("runc runs the images in this test: build it with `hack/tools/build.sh runc` (%v)", err)
	}
	return p
}

// runc runs the bundle's container to its end and returns its output and exit code.
type runc struct {
	bin, root string
}

func newRunc(t *testing.T) runc {
	return runc{bin: runcBinary(t), root: t.TempDir()}
}

func (r runc) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, r.bin, append([]string{"--root", r.root}, args...)...)
}

func containerID(t *testing.T) string {
	return fmt.Sprintf("nicpool-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), os.Getpid())
}

func (r runc) run(t *testing.T, dir string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := r.command(ctx, "run", "--bundle", dir, containerID(t))
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("runc run: %v\n%s", err, out.String())
		return "", -1
	}
}

// The ipamd DaemonSet's init container, run from the plugin's image as the manifests
// say (command, user, read-only root, no capabilities), leaves in the node's CNI bin
// directory the plugin pair, which the runtime can execute: the Go plugin as
// nicpool-cni and the front under every name the command gives, each answering
// VERSION (the front through the Go plugin beside it).
func TestInitContainerInstallsThePluginUnderRunc(t *testing.T) {
	r := newRunc(t)
	objs, err := manifests.Render(filepath.Join(testenv.RepoRoot(), "manifests", "base"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" && o.GetName() == "nicpool-ipamd" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(ds.Spec.Template.Spec.InitContainers) == 0 {
		t.Fatal("the ipamd DaemonSet has no init container")
	}
	ic := ds.Spec.Template.Spec.InitContainers[0]
	if sc := ic.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Fatal("the init container's root filesystem is writable; this test runs it read-only")
	}
	hostCNIBin := t.TempDir()
	binds := map[string]string{}
	for _, vm := range ic.VolumeMounts {
		binds[vm.MountPath] = hostCNIBin
	}
	out, code := r.run(t, bundle(t, container{
		image: filepath.Base(strings.Split(ic.Image, ":")[0]), command: ic.Command, args: ic.Args,
		uid: ic.SecurityContext.RunAsUser, binds: binds,
	}))
	if code != 0 {
		t.Fatalf("init container exited %d:\n%s", code, out)
	}
	entries, err := os.ReadDir(hostCNIBin)
	if err != nil {
		t.Fatal(err)
	}
	var installed []string
	for _, e := range entries {
		installed = append(installed, e.Name())
	}
	if want := append([]string{install.GoPlugin}, ic.Command[3:]...); strings.Join(installed, " ") != strings.Join(slices.Sorted(slices.Values(want)), " ") {
		t.Errorf("the init container installed %v; its command names %v\n%s", installed, want, out)
	}
	for _, e := range entries {
		p := filepath.Join(hostCNIBin, e.Name())
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o755 || strings.HasPrefix(e.Name(), ".") {
			t.Errorf("%s: mode %v (%v); want only executable plugins, no leftovers", e.Name(), st.Mode(), err)
			continue
		}
		cmd := exec.Command(p)
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
		version, err := cmd.Output()
		if err != nil || !strings.Contains(string(version), `"supportedVersions"`) {
			t.Errorf("installed %s answers VERSION with %q (%v)", e.Name(), version, err)
		}
	}
}

// The daemons' images start their binaries under runc as their own users: -h lists
// the flags their manifests pass.
func TestDaemonEntrypointsRunUnderRunc(t *testing.T) {
	r := newRunc(t)
	for name, flag := range map[string]string{"nicpool-ipamd": "-node-name", "nicpool-webhook": "-webhook-port"} {
		t.Run(name, func(t *testing.T) {
			out, code := r.run(t, bundle(t, container{image: name, args: []string{"-h"}}))
			if code != 0 && code != 2 {
				t.Fatalf("%s -h exited %d:\n%s", name, code, out)
			}
			if !strings.Contains(out, flag) {
				t.Errorf("%s -h does not list %s:\n%s", name, flag, out)
			}
		})
	}
}

// The pause image holds a pod sandbox until the runtime stops it: it keeps running,
// and ends on SIGTERM (with status 0 once its handler is installed; a signal that
// arrives before that still ends it, through the Go runtime).
func TestPauseRunsUntilSignalledUnderRunc(t *testing.T) {
	r := newRunc(t)
	dir := bundle(t, container{image: "pause"})
	id := containerID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := r.command(ctx, "run", "--bundle", dir, id)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Running, and still running after it had time to exit on its own.
	deadline := time.Now().Add(time.Minute)
	for {
		state, err := r.command(ctx, "state", id).Output()
		if err == nil && strings.Contains(string(state), `"status": "running"`) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("pause exited on its own (%v):\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause never ran:\n%s", out.String())
		}
	}
	if b, err := r.command(ctx, "kill", id, "TERM").CombinedOutput(); err != nil {
		t.Fatalf("runc kill: %v\n%s", err, b)
	}
	if err := <-done; err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Errorf("runc run: %v\n%s", err, out.String())
		}
		t.Logf("pause ended on SIGTERM with %v", err)
	}
}

// `pause -v` prints the version of the upstream image it stands in for and exits:
// the e2e suite's Job pods complete with it on real nodes.
func TestPauseVersionUnderRunc(t *testing.T) {
	r := newRunc(t)
	out, code := r.run(t, bundle(t, container{image: "pause", args: []string{"-v"}}))
	_, tag, _ := strings.Cut(images.Pause.Ref[strings.LastIndex(images.Pause.Ref, "/"):], ":")
	if code != 0 || !strings.Contains(out, " "+tag) {
		t.Errorf("pause -v exited %d printing %q; want 0 and version %s", code, out, tag)
	}
}

// The busybox image that stands in for alpine runs what spiderpool's specs run in
// their containers: a shell by either name that ends with the code it is given (a
// Job's pod that fails), sleep, ip and nc, each found at Alpine's path; and with no
// command, Alpine's CMD, a shell.
func TestBusyboxRunsWhatSpiderpoolSpecsRunUnderRunc(t *testing.T) {
	r := newRunc(t)
	im := images.BusyboxAsAlpine
	t.Run("exit code", func(t *testing.T) {
		out, code := r.run(t, bundle(t, container{image: im.Name, command: []string{"/bin/ash", "-c", "sleep 0.1; exit 3"}}))
		if code != 3 {
			t.Errorf("ash -c 'exit 3' exited %d:\n%s", code, out)
		}
	})
	t.Run("commands", func(t *testing.T) {
		script := "for p in " + strings.Join(im.Links, " ") + "; do [ -x $p ] || echo missing $p; done; ip a show lo; nc --help 2>&1 | head -1"
		out, code := r.run(t, bundle(t, container{image: im.Name, command: []string{"/bin/sh", "-c", script}}))
		if code != 0 || strings.Contains(out, "missing") || !strings.Contains(out, "lo: <LOOPBACK") || !strings.Contains(out, "BusyBox") {
			t.Errorf("exited %d; want every link executable, ip's loopback and nc's usage:\n%s", code, out)
		}
	})
	t.Run("default command", func(t *testing.T) {
		cf := unpack(t, im.Name, t.TempDir())
		if len(cf.Config.Entrypoint) != 0 || strings.Join(cf.Config.Cmd, " ") != "/bin/sh" || cf.Config.Labels["org.opencontainers.image.licenses"] != "GPL-2.0-only" {
			t.Errorf("entrypoint %q, cmd %q, labels %v; want Alpine's CMD /bin/sh alone and BusyBox's licence", cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Labels)
		}
		out, code := r.run(t, bundle(t, container{image: im.Name}))
		if code != 0 {
			t.Errorf("the default command exited %d:\n%s", code, out)
		}
	})
}
