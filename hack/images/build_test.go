package images_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nicpool/nicpool/hack/images"
)

// The same binaries make the same tarball, byte for byte: a rebuild without a change
// changes no digest (so Tilt and the nodes see nothing new).
func TestBuildIsReproducible(t *testing.T) {
	var sums [][]byte
	for range 2 {
		out := t.TempDir()
		built, err := images.Build(images.Options{BinDir: binDir, OutDir: out, Names: []string{"nicpool"}, Platforms: []string{images.HostPlatform().String()}})
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(built[0].Path)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, data)
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Error("two builds of the same binary differ")
	}
}

// A binary that needs a dynamic loader, or is built for another machine, would not
// start in an image without libc: the build refuses it and says how to fix it.
func TestBuildRefusesBinariesTheImageCannotRun(t *testing.T) {
	host := images.HostPlatform()
	// The system's own programs are dynamically linked.
	dynamic, err := filepath.EvalSymlinks("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := images.CheckStatic(dynamic, host); !errors.Is(err, images.ErrNotStatic) || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("%s: got %v, want %v naming CGO_ENABLED=0", dynamic, err, images.ErrNotStatic)
	}
	other := v1.Platform{OS: "linux", Architecture: "arm64"}
	if host.Architecture == "arm64" {
		other.Architecture = "amd64"
	}
	static := filepath.Join(binDir, "nicpool")
	if err := images.CheckStatic(static, other); err == nil || !strings.Contains(err.Error(), "not "+other.String()) {
		t.Errorf("a %s binary as %s: got %v", host, other, err)
	}
	if err := images.CheckStatic(static, host); err != nil {
		t.Errorf("the static plugin: %v", err)
	}
	// Other platforms' binaries are looked for where `make images` cross-builds them.
	_, err = images.Build(images.Options{BinDir: binDir, OutDir: t.TempDir(), Names: []string{"nicpool"}, Platforms: []string{other.String()}})
	if want := filepath.Join(binDir, other.OS+"_"+other.Architecture, "nicpool-cni"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("no %s binary: got %v, want an error naming %s", other, err, want)
	}
}

// The plugin's image carries the Go plugin and its front side by side: the front
// execs nicpool-cni from its own directory. Without the front there is no image.
func TestPluginImageNeedsTheFront(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(binDir, "nicpool-cni"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nicpool-cni"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = images.Build(images.Options{BinDir: dir, OutDir: t.TempDir(), Names: []string{"nicpool"}, Platforms: []string{images.HostPlatform().String()}})
	if want := filepath.Join(dir, "nicpool"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("no front: got %v, want an error naming %s", err, want)
	}
}

func TestBuildRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opts images.Options
		want string
	}{
		{images.Options{Names: []string{"nicpool-operator"}}, `unknown image "nicpool-operator"`},
		{images.Options{Ref: "example/x:1", Names: []string{"nicpool", "pause"}}, "names one image"},
		{images.Options{Platforms: []string{"windows/amd64"}}, "want linux/<arch>"},
		{images.Options{Ref: "Bad Ref", Names: []string{"nicpool"}}, "image reference"},
	} {
		tc.opts.BinDir, tc.opts.OutDir = binDir, t.TempDir()
		if tc.opts.Platforms == nil {
			tc.opts.Platforms = []string{images.HostPlatform().String()}
		}
		if _, err := images.Build(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error with %q", tc.opts, err, tc.want)
		}
	}
}

// Each tarball names its image as the kubelet asks containerd for it.
func TestTarballsNameTheirImagesForContainerd(t *testing.T) {
	for name, want := range map[string]string{
		"nicpool-ipamd": "docker.io/nicpool/nicpool-ipamd:dev",
		"pause":         "registry.k8s.io/pause:3.10",
	} {
		ref, _, err := images.Load(tarballs[name], t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if ref != want {
			t.Errorf("%s: named %q, want %q", name, ref, want)
		}
		// Read from index.json alone, as the local cluster reads what its nodes import.
		if got, err := images.Name(tarballs[name]); err != nil || got != want {
			t.Errorf("Name(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	notLayout := filepath.Join(t.TempDir(), "x.tar")
	if err := os.WriteFile(notLayout, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := images.Name(notLayout); err == nil {
		t.Errorf("Name of an empty tarball = %q; want an error", got)
	}
}
