package manifests_test

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/hack/images"
	"github.com/nicpool/nicpool/manifests"
)

// dockerfile is what the final stage of a build/*.Dockerfile makes: the parts of an
// image a container runtime uses.
type dockerfile struct {
	base       string
	buildLine  string // the build stage's `go build` command
	frontLine  string // the C front's compile command (cc ...), if any
	entrypoint []string
	cmd        []string
	user       string
	workdir    string
	env        []string
	labels     map[string]string
	// files maps each path the stage creates (without the leading /) to its mode;
	// copied maps the copied binaries' paths to their names under /out.
	files  map[string]os.FileMode
	copied map[string]string
}

var instructionRE = regexp.MustCompile(`^([A-Za-z]+)\s+(.*)$`)

// frontRE finds a stage's compile command of the C front: `<FrontCC> ...` up to its
// source.
var frontRE = regexp.MustCompile(`^RUN .*?(?:^|\s)(` + regexp.QuoteMeta(binaries.FrontCC) + ` .*` + regexp.QuoteMeta(binaries.FrontSource) + `)$`)

// parseDockerfile reads the instructions of a Dockerfile's final stage. Instructions
// it does not know fail the test, so that a new one is compared too.
func parseDockerfile(t *testing.T, file string) dockerfile {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines; drop comments and blank lines.
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(l)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	df := dockerfile{labels: map[string]string{}, files: map[string]os.FileMode{}, copied: map[string]string{}}
	final := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			final = i
		}
		if strings.Contains(l, " go build ") {
			df.buildLine = l[strings.Index(l, "CGO_ENABLED"):]
		}
		if m := frontRE.FindStringSubmatch(l); m != nil {
			df.frontLine = m[1]
		}
	}
	for _, l := range lines[final:] {
		m := instructionRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("%s: cannot read %q", file, l)
		}
		args := m[2]
		switch strings.ToUpper(m[1]) {
		case "FROM":
			df.base = strings.Fields(args)[0]
		case "COPY":
			f := strings.Fields(args)
			if len(f) != 3 || !strings.HasPrefix(f[0], "--from=") || !strings.HasPrefix(f[1], "/out/") || !path.IsAbs(f[2]) || strings.HasSuffix(f[2], "/") {
				t.Fatalf("%s: %q: compared are copies of one built binary to an absolute file path (COPY --from=<stage> /out/<binary> /path/file)", file, l)
			}
			dest := strings.TrimPrefix(path.Clean(f[2]), "/")
			// COPY makes the missing parents as root-owned 0755 directories and
			// keeps the mode `go build` gave the binary.
			parts := strings.Split(dest, "/")
			for i := 1; i < len(parts); i++ {
				df.files[strings.Join(parts[:i], "/")] = os.ModeDir | 0o755
			}
			df.files[dest] = 0o755
			df.copied[dest] = strings.TrimPrefix(f[1], "/out/")
		case "USER":
			df.user = args
		case "WORKDIR":
			df.workdir = args
		case "ENV":
			df.env = append(df.env, splitWords(t, file, args)...)
		case "LABEL":
			for _, kv := range splitWords(t, file, args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("%s: LABEL %q: want key=value", file, kv)
				}
				df.labels[k] = v
			}
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(args), &list); err != nil {
				t.Fatalf("%s: %q: want the exec (JSON) form; the images have no shell", file, l)
			}
			if strings.EqualFold(m[1], "ENTRYPOINT") {
				df.entrypoint = list
			} else {
				df.cmd = list
			}
		default:
			t.Fatalf("%s: the final stage's %s is not compared with the image hack/images builds: teach manifests/dockerfile_test.go and hack/images", file, m[1])
		}
	}
	return df
}

// splitWords splits key=value words, values optionally double-quoted.
func splitWords(t *testing.T, file, s string) []string {
	t.Helper()
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || strings.ContainsAny(k, " \"") {
			t.Fatalf("%s: cannot read %q: want key=value or key=\"value\"", file, s)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				t.Fatalf("%s: unterminated quote in %q", file, s)
			}
			v, rest = rest[1:1+end], rest[2+end:]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		out = append(out, k+"="+v)
		s = rest
	}
	return out
}

// staticBinary builds a small static program for each platform (its content does not
// matter here, only that the image builder accepts it), laid out like `make images`.
func staticBinaries(t *testing.T, platforms []v1.Platform, names []string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range platforms {
		out := images.BinaryPath(dir, p, "placeholder")
		build := exec.Command("go", "build", "-o", out, "./hack/images/pause")
		build.Dir = testenv.RepoRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build a %s binary: %v\n%s", p, err, b)
		}
		for _, n := range names {
			if err := os.Link(out, filepath.Join(filepath.Dir(out), n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

type entry struct {
	mode     os.FileMode
	uid, gid int
	content  []byte
}

// filesOf lists the files of an image's flattened filesystem.
func filesOf(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = entry{mode: h.FileInfo().Mode(), uid: h.Uid, gid: h.Gid, content: data}
	}
}

// Each image `make images` builds without Docker has the layout its Dockerfile gives
// the image `make docker-images` builds: the same files with the same modes and
// owners (and nothing else: both start from scratch), the same entrypoint, command,
// user, working directory, environment and labels, on every platform. The tarball
// names the image as manifests/base does.
func TestImagesWithoutDockerMatchTheDockerfiles(t *testing.T) {
	host := images.HostPlatform()
	other := v1.Platform{OS: "linux", Architecture: "arm64"}
	if host.Architecture == "arm64" {
		other.Architecture = "amd64"
	}
	platforms := []v1.Platform{host, other}
	var names, bins []string
	for _, im := range images.Product {
		names = append(names, im.Name)
		for _, f := range im.Files() {
			bins = append(bins, f.Binary)
		}
	}
	binDir := staticBinaries(t, platforms, bins)
	out := t.TempDir()
	// As `make images` names them: the registry and the chart's appVersion.
	built, err := images.Build(images.Options{
		BinDir: binDir, OutDir: out, Names: names, Repo: "ghcr.io/nicpool", Tag: manifests.AppVersion,
		Platforms: []string{host.String(), other.String()},
		Created:   time.Unix(1700000000, 0),
	})
	if err != nil {
		t.Fatal(err)
	}

	// The names a node's containerd gives the imported tarballs are the images the
	// base kustomization sets.
	var kust struct {
		Images []struct{ Name, NewName, NewTag string }
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "base", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kust); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, i := range kust.Images {
		n, err := images.ContainerdName(i.NewName + ":" + i.NewTag)
		if err != nil {
			t.Fatal(err)
		}
		want[i.Name] = n
	}

	dockerfiles, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "build", "*.Dockerfile"))
	var fromDockerfiles []string
	for _, f := range dockerfiles {
		fromDockerfiles = append(fromDockerfiles, strings.TrimSuffix(filepath.Base(f), ".Dockerfile"))
	}
	slices.Sort(fromDockerfiles)
	if !slices.Equal(fromDockerfiles, slices.Sorted(slices.Values(names))) {
		t.Errorf("build/ has Dockerfiles for %v; hack/images builds %v", fromDockerfiles, names)
	}

	for _, b := range built {
		t.Run(b.Name, func(t *testing.T) {
			df := parseDockerfile(t, filepath.Join(testenv.RepoRoot(), "build", b.Name+".Dockerfile"))
			if df.base != "scratch" {
				t.Fatalf("the final stage is FROM %s: hack/images builds on no base image (none can be pulled without a registry), so the Dockerfile must be FROM scratch", df.base)
			}
			ref, idx, err := images.Load(b.Path, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if ref != want[b.Name] {
				t.Errorf("the tarball names the image %q; manifests/base runs %q", ref, want[b.Name])
			}
			// BuildKit gives an image FROM scratch the default PATH unless ENV sets one.
			wantEnv := slices.Clone(df.env)
			if !slices.ContainsFunc(wantEnv, func(s string) bool { return strings.HasPrefix(s, "PATH=") }) {
				wantEnv = append([]string{"PATH=" + images.DefaultPath}, wantEnv...)
			}
			for _, p := range platforms {
				img, err := images.ImageFor(idx, p)
				if err != nil {
					t.Fatal(err)
				}
				cf, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				if cf.OS != p.OS || cf.Architecture != p.Architecture {
					t.Errorf("%s: the config says %s/%s", p, cf.OS, cf.Architecture)
				}
				c := cf.Config
				for _, d := range []struct {
					what      string
					got, want any
				}{
					{"ENTRYPOINT", c.Entrypoint, df.entrypoint},
					{"CMD", c.Cmd, df.cmd},
					{"USER", c.User, df.user},
					{"WORKDIR", c.WorkingDir, df.workdir},
					{"ENV", c.Env, wantEnv},
					{"LABEL", c.Labels, df.labels},
				} {
					if fmt.Sprint(d.got) != fmt.Sprint(d.want) {
						t.Errorf("%s: %s is %v without Docker, %v in the Dockerfile", p, d.what, d.got, d.want)
					}
				}
				files := filesOf(t, img)
				gotModes := map[string]os.FileMode{}
				for name, e := range files {
					gotModes[name] = e.mode
					if e.uid != 0 || e.gid != 0 {
						t.Errorf("%s: %s is owned by %d:%d, COPY makes it root's", p, name, e.uid, e.gid)
					}
				}
				if !maps.Equal(gotModes, df.files) {
					t.Errorf("%s: files without Docker %v, from the Dockerfile %v", p, gotModes, df.files)
				}
				for dest, binary := range df.copied {
					src, err := os.ReadFile(images.BinaryPath(binDir, p, binary))
					if err != nil {
						t.Fatal(err)
					}
					if string(files[dest].content) != string(src) {
						t.Errorf("%s: /%s is not bin/%s", p, dest, binary)
					}
				}
				// The entrypoint is the copied binary: the image starts what it carries.
				if len(c.Entrypoint) > 0 {
					if _, ok := df.copied[strings.TrimPrefix(c.Entrypoint[0], "/")]; !ok {
						t.Errorf("the entrypoint %s is not a binary the image carries (%v)", c.Entrypoint[0], df.copied)
					}
				}
			}
		})
	}
}

// The Dockerfiles build the binaries as `make build` does (static: the images have no
// libc), so both ways to build an image carry the same programs.
func TestDockerfilesBuildAsTheMakefile(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GO_BUILD\s*:=\s*CGO_ENABLED=0 \$\(GO\) build (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no static GO_BUILD line (GO_BUILD := CGO_ENABLED=0 $(GO) build ...)")
	}
	// The linker flags, with the Makefile's variables as the Dockerfiles' build
	// arguments: the same version package, stamped from the same two values.
	ld := regexp.MustCompile(`(?m)^GO_LDFLAGS\s*:=\s*(.*?)\s*$`).FindSubmatch(mk)
	pkg := regexp.MustCompile(`(?m)^VERSION_PKG\s*:=\s*(\S+)\s*$`).FindSubmatch(mk)
	if ld == nil || pkg == nil {
		t.Fatal("the Makefile has no GO_LDFLAGS and VERSION_PKG lines")
	}
	if string(pkg[1]) != binaries.VersionPackage {
		t.Errorf("the Makefile stamps the version into %s, e2e/binaries into %s", pkg[1], binaries.VersionPackage)
	}
	ldflags := strings.NewReplacer("$(VERSION_PKG)", string(pkg[1]), "$(VERSION)", "${VERSION}", "$(REVISION)", "${REVISION}").Replace(string(ld[1]))
	makeFlags := strings.Replace(string(m[1]), "$(GO_LDFLAGS)", ldflags, 1)
	if strings.Contains(makeFlags, "$(") {
		t.Fatalf("the Makefile's GO_BUILD flags %s use a variable this test does not know", makeFlags)
	}
	for _, im := range images.Product {
		df := parseDockerfile(t, filepath.Join(testenv.RepoRoot(), "build", im.Name+".Dockerfile"))
		want := "CGO_ENABLED=0 go build " + makeFlags + " -o /out/" + im.Binary + " ./cmd/" + im.Binary
		if df.buildLine != want {
			t.Errorf("%s builds with\n  %s\nthe Makefile with\n  %s", im.Name, df.buildLine, want)
		}
	}
}

// The CNI plugin's front is compiled the same way everywhere: by `make build`, by
// build/nicpool.Dockerfile and by the tests' builder (e2e/binaries), from the one
// source, static against musl and not position independent (the image has no C
// library; a static PIE would relocate itself at every exec).
func TestFrontBuildsAsTheMakefile(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	src := regexp.MustCompile(`(?m)^FRONT_SRC\s*:=\s*(\S+)\s*$`).FindSubmatch(mk)
	cc := regexp.MustCompile(`(?m)^FRONT_CC\s*:=\s*(\S+)\s*$`).FindSubmatch(mk)
	flags := regexp.MustCompile(`(?m)^FRONT_CFLAGS\s*:=\s*(.*?)\s*$`).FindSubmatch(mk)
	if src == nil || cc == nil || flags == nil || !strings.Contains(string(mk), "$(FRONT_CC) $(FRONT_CFLAGS) -o $(BIN)/nicpool $(FRONT_SRC)") {
		t.Fatal("the Makefile has no FRONT_SRC, FRONT_CC, FRONT_CFLAGS and `$(FRONT_CC) $(FRONT_CFLAGS) -o $(BIN)/nicpool $(FRONT_SRC)`")
	}
	if string(src[1]) != binaries.FrontSource || string(cc[1]) != binaries.FrontCC || string(flags[1]) != strings.Join(binaries.FrontCFlags, " ") {
		t.Errorf("the Makefile compiles %s with %s %s; e2e/binaries compiles %s with %s %s", src[1], cc[1], flags[1], binaries.FrontSource, binaries.FrontCC, strings.Join(binaries.FrontCFlags, " "))
	}
	for _, f := range []string{"-static", "-no-pie"} {
		if !slices.Contains(binaries.FrontCFlags, f) {
			t.Errorf("the front is compiled with %v, without %s: it must be a plain static executable", binaries.FrontCFlags, f)
		}
	}
	var carriers []string
	for _, im := range images.Product {
		df := parseDockerfile(t, filepath.Join(testenv.RepoRoot(), "build", im.Name+".Dockerfile"))
		if df.frontLine == "" {
			continue
		}
		carriers = append(carriers, im.Name)
		if want := string(cc[1]) + " " + string(flags[1]) + " -o /out/nicpool " + string(src[1]); df.frontLine != want {
			t.Errorf("%s compiles the front with\n  %s\nthe Makefile with\n  %s", im.Name, df.frontLine, want)
		}
		if !slices.Contains(im.Beside, "nicpool") {
			t.Errorf("%s compiles the front but hack/images does not carry it (%v)", im.Name, im.Beside)
		}
	}
	if !slices.Equal(carriers, []string{"nicpool"}) {
		t.Errorf("the images that compile the front are %v; want the plugin's image, nicpool", carriers)
	}
}

// The init container runs the plugin's installer from where the image carries the
// plugin, into the volume holding the host's CNI bin directory.
func TestInstallCNIMatchesTheImage(t *testing.T) {
	objs := render(t, ".")
	ds := object[appsv1.DaemonSet](t, objs, "DaemonSet", "nicpool-ipamd")
	install := ds.Spec.Template.Spec.InitContainers[0]
	plugin, err := images.Lookup("nicpool")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(strings.Split(install.Image, ":")[0], "/"+plugin.Name) {
		t.Errorf("init container runs image %s, want the plugin's image %s", install.Image, plugin.Name)
	}
	if len(install.Command) < 3 || install.Command[0] != plugin.Path || install.Command[1] != "install" {
		t.Fatalf("init container runs %q; want %s install --dir=<CNI bin mount> [names]", install.Command, plugin.Path)
	}
	var mounts []string
	for _, vm := range install.VolumeMounts {
		mounts = append(mounts, vm.MountPath)
	}
	if dir, ok := strings.CutPrefix(install.Command[2], "--dir="); !ok || !slices.Contains(mounts, dir) {
		t.Errorf("init container installs into %q; its mounts are %v", install.Command[2], mounts)
	}
	// Networks written for spiderpool, and the DELs runtimes cached for its pods, exec
	// /opt/cni/bin/spiderpool: the same binary serves them.
	if names := install.Command[3:]; !slices.Contains(names, "nicpool") || !slices.Contains(names, "spiderpool") {
		t.Errorf("init container installs the plugin as %q; want nicpool and spiderpool", names)
	}
	if install.SecurityContext == nil || install.SecurityContext.RunAsUser == nil || *install.SecurityContext.RunAsUser != 0 {
		t.Errorf("the installer writes the host's root-owned CNI bin directory: it runs as root")
	}
}

// The webhook image runs as the user its Deployment requires.
func TestWebhookImageUserIsTheDeployments(t *testing.T) {
	objs := render(t, ".")
	sc := object[appsv1.Deployment](t, objs, "Deployment", "nicpool-webhook").Spec.Template.Spec.SecurityContext
	im, err := images.Lookup("nicpool-webhook")
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(*sc.RunAsUser, 10) + ":" + strconv.FormatInt(*sc.RunAsGroup, 10)
	if im.User != want {
		t.Errorf("the webhook image runs as %q, the Deployment as %s", im.User, want)
	}
}
