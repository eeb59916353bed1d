package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/hack/images"
)

const version = "v0.1.0"

// `make release VERSION=v0.1.0` on a clean clone of this repository's HEAD writes the
// whole release: multi-arch images as OCI layouts with their digests, an SBOM each,
// the chart pinned to those digests, the install YAML, the plugin's archives with the
// krew manifest naming their checksums, and SHA256SUMS of it all.
func TestMakeReleaseOnACleanClone(t *testing.T) {
	clone := filepath.Join(t.TempDir(), "nicpool")
	run(t, "", "git", "clone", "--quiet", "--no-hardlinks", testenv.RepoRoot(), clone)
	out := filepath.Join(t.TempDir(), "release")
	run(t, clone, "make", "release", "VERSION="+version, "RELEASE_DIR="+out)

	// Images: an OCI layout per image, tagged with the version, for both platforms,
	// its index's digest in <image>.digest.
	digests := map[string]string{}
	for _, im := range images.Product {
		top, m := layoutIndex(t, out, im.Name)
		if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
			t.Fatalf("image %s: layout index %+v, want one index tagged %s", im.Name, m.Manifests, version)
		}
		idx, err := top.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		im2, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, d := range im2.Manifests {
			platforms = append(platforms, d.Platform.String())
		}
		if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
			t.Errorf("image %s is for %v, want linux/amd64 and linux/arm64", im.Name, platforms)
		}
		digests[im.Name] = m.Manifests[0].Digest.String()
		if got := strings.TrimSpace(read(t, filepath.Join(out, "images", im.Name+".digest"))); got != digests[im.Name] {
			t.Errorf("%s.digest says %s, the layout %s", im.Name, got, digests[im.Name])
		}
		if _, err := os.Stat(filepath.Join(out, "images", im.Name+".tar")); err != nil {
			t.Error(err)
		}

		// Its SBOM names the image by digest and the modules of its Go binary.
		var sbom struct {
			SPDXVersion string `json:"spdxVersion"`
			Name        string `json:"name"`
			Packages    []struct {
				Name, VersionInfo string
			} `json:"packages"`
		}
		if err := json.Unmarshal([]byte(read(t, filepath.Join(out, "sbom", im.Name+".spdx.json"))), &sbom); err != nil {
			t.Fatal(err)
		}
		pkgs := map[string]string{}
		for _, p := range sbom.Packages {
			pkgs[p.Name] = p.VersionInfo
		}
		if sbom.SPDXVersion != "SPDX-2.3" || sbom.Name != im.Name+"@"+digests[im.Name] || pkgs[im.Binary] != version || pkgs["go"] != strings.TrimPrefix(runtime.Version(), "go") {
			t.Errorf("SBOM of %s: %s %s, packages %v", im.Name, sbom.SPDXVersion, sbom.Name, pkgs)
		}
		if im.Name == "nicpool-webhook" && pkgs["sigs.k8s.io/controller-runtime"] == "" {
			t.Errorf("the webhook's SBOM lacks controller-runtime: %v", pkgs)
		}
	}
	pinned := func(name string) string { return "ghcr.io/nicpool/" + name + ":" + version + "@" + digests[name] }

	// The chart: its versions, and every image pinned when rendered with defaults.
	ch, err := loader.Load(filepath.Join(out, "nicpool-0.1.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "0.1.0" || ch.Metadata.AppVersion != version {
		t.Errorf("chart %s appVersion %s", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace, inst.IncludeCRDs = true, true, true, true
	inst.ReleaseName, inst.Namespace = "nicpool", "nicpool-system"
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	rel, err := inst.Run(ch, nil)
	if err != nil {
		t.Fatalf("render the packaged chart: %v", err)
	}
	for _, file := range []string{"", "nicpool-" + version + ".yaml", "nicpool-" + version + "-self-managed.yaml"} {
		text, what := rel.Manifest, "the packaged chart"
		if file != "" {
			text, what = read(t, filepath.Join(out, file)), file
		}
		for _, im := range images.Product {
			if !strings.Contains(text, "image: "+pinned(im.Name)) && !strings.Contains(text, `image: "`+pinned(im.Name)+`"`) {
				t.Errorf("%s does not run %s", what, pinned(im.Name))
			}
		}
		if strings.Contains(text, ":dev") {
			t.Errorf("%s names a :dev image", what)
		}
	}

	// The plugin's archives, the krew manifest and SHA256SUMS.
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(read(t, filepath.Join(out, "SHA256SUMS"))), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		sums[file] = sum
		if got := sha(t, filepath.Join(out, file)); got != sum {
			t.Errorf("SHA256SUMS says %s for %s, it is %s", sum, file, got)
		}
	}
	var krew struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(out, "kubectl-nicpool.krew.yaml"))), &krew); err != nil {
		t.Fatal(err)
	}
	if krew.Spec.Version != version || len(krew.Spec.Platforms) != len(PluginPlatforms) {
		t.Fatalf("krew manifest version %s with %d platforms", krew.Spec.Version, len(krew.Spec.Platforms))
	}
	for _, p := range krew.Spec.Platforms {
		archive := "kubectl-nicpool_" + p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"] + ".tar.gz"
		if p.URI != "https://github.com/nicpool/nicpool/releases/download/"+version+"/"+archive || p.SHA256 != sums[archive] || p.SHA256 == "" {
			t.Errorf("krew platform %v: uri %s sha256 %s; SHA256SUMS says %s", p.Selector.MatchLabels, p.URI, p.SHA256, sums[archive])
		}
		files := untar(t, filepath.Join(out, archive))
		if _, ok := files["LICENSE"]; !ok {
			t.Errorf("%s has no LICENSE: %v", archive, keys(files))
		}
		if _, ok := files[p.Bin]; !ok {
			t.Errorf("%s has no %s: %v", archive, p.Bin, keys(files))
		}
		if p.Selector.MatchLabels["os"] == runtime.GOOS && p.Selector.MatchLabels["arch"] == runtime.GOARCH {
			bin := filepath.Join(t.TempDir(), p.Bin)
			if err := os.WriteFile(bin, files[p.Bin], 0o755); err != nil {
				t.Fatal(err)
			}
			if got := run(t, "", bin, "version", "--client"); !strings.HasPrefix(got, "Client Version: "+version+" (revision ") {
				t.Errorf("kubectl-nicpool version --client of the release: %q", got)
			}
		}
	}
}

// A version that is not vX.Y.Z is refused before anything is built.
func TestReleaseRefusesABadVersion(t *testing.T) {
	for _, v := range []string{"", "0.1.0", "v0.1", "v01.0.0", "dev"} {
		if err := Run(Options{Version: v, Out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "vMAJOR.MINOR.PATCH") {
			t.Errorf("version %q: err = %v", v, err)
		}
	}
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sha(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReader(f)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func untar(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// layoutIndex reads the OCI layout the release in out holds for the image name: its
// top index and that index's manifest.
func layoutIndex(t *testing.T, out, name string) (v1.ImageIndex, *v1.IndexManifest) {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(out, "images", name))
	if err != nil {
		t.Fatalf("image %s: %v", name, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return top, m
}
