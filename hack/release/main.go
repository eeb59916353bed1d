// Command release writes everything a nicpool release publishes into one folder
// (`make release VERSION=vX.Y.Z` runs it after building the binaries and images):
//
//	images/<image>/           the multi-arch image as an OCI image layout (tag VERSION)
//	images/<image>.tar        the same layout as a tarball (ctr/docker/kind import it)
//	images/<image>.digest     the digest of its image index, which everything pins
//	sbom/<image>.spdx.json    an SPDX 2.3 SBOM of the image's Go binaries
//	nicpool-<X.Y.Z>.tgz       the Helm chart (version X.Y.Z, appVersion VERSION,
//	                          images pinned by digest), packaged with the Helm SDK
//	nicpool-VERSION.yaml      the kustomize install (cert-manager), images by digest
//	nicpool-VERSION-self-managed.yaml
//	kubectl-nicpool_<os>_<arch>.tar.gz   the kubectl plugin and LICENSE
//	kubectl-nicpool.krew.yaml the krew manifest with each archive's address and sha256
//	SHA256SUMS                the sha256 of every file above
//
// Only the push to a registry and the signing are left to the release workflow
// (.github/workflows/release.yml).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/hack/images"
	"github.com/nicpool/nicpool/manifests"
)

// Options of one release.
type Options struct {
	// Root is the repository.
	Root string
	// Version is the release's version, vX.Y.Z[-pre].
	Version string
	// Images holds the product images' tarballs (`make images`: dist/images).
	Images string
	// Bin holds the binaries: <os>_<arch>/<binary> for every platform the images and
	// archives carry, and the host's directly (`make build`).
	Bin string
	// Out receives the release.
	Out string
	// Registry is where the release's images are published.
	Registry string
	// Platforms of the kubectl-nicpool archives, os/arch.
	Platforms []string
	// Created is every timestamp written (SOURCE_DATE_EPOCH, else the epoch).
	Created time.Time
}

// PluginPlatforms are the platforms of the kubectl-nicpool archives.
var PluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func main() {
	var o Options
	flag.StringVar(&o.Root, "root", ".", "the repository")
	flag.StringVar(&o.Version, "version", "", "the release's version, vX.Y.Z")
	flag.StringVar(&o.Images, "images", "dist/images", "the product images' tarballs")
	flag.StringVar(&o.Bin, "bin", "bin", "the binaries (<os>_<arch>/ for other platforms)")
	flag.StringVar(&o.Out, "out", "", "the release folder (default dist/release/VERSION)")
	flag.StringVar(&o.Registry, "registry", "ghcr.io/nicpool", "where the images are published")
	platforms := flag.String("plugin-platforms", strings.Join(PluginPlatforms, ","), "the kubectl-nicpool archives' platforms, os/arch,...: every one krew serves for a release; fewer for a test, whose krew manifest then lists only those")
	flag.Parse()
	if o.Out == "" {
		o.Out = filepath.Join("dist", "release", o.Version)
	}
	o.Platforms = strings.Split(*platforms, ",")
	if err := Run(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", o.Out)
}

// Run writes the release.
func Run(o Options) error {
	if !semver.MatchString(o.Version) {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE] (make release VERSION=v0.1.0)", o.Version)
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			var sec int64
			if _, err := fmt.Sscan(s, &sec); err != nil {
				return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
			}
			o.Created = time.Unix(sec, 0).UTC()
		}
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return err
	}
	for _, d := range []string{"images", "sbom"} {
		if err := os.MkdirAll(filepath.Join(o.Out, d), 0o755); err != nil {
			return err
		}
	}
	digests := map[string]string{}
	for _, im := range images.Product {
		d, err := writeImage(o, im)
		if err != nil {
			return fmt.Errorf("image %s: %w", im.Name, err)
		}
		digests[im.Name] = d
		if err := writeSBOM(o, im, d); err != nil {
			return fmt.Errorf("SBOM of %s: %w", im.Name, err)
		}
	}
	if err := writeChart(o, digests); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if err := writeInstallYAML(o, digests); err != nil {
		return fmt.Errorf("install YAML: %w", err)
	}
	if err := writePlugin(o); err != nil {
		return fmt.Errorf("kubectl-nicpool: %w", err)
	}
	return writeChecksums(o.Out)
}

// writeImage copies the image's tarball and writes it as an OCI layout tagged with
// the version; it returns the digest of its index.
func writeImage(o Options, im images.Image) (string, error) {
	tarball := filepath.Join(o.Images, im.Name+".tar")
	tmp, err := os.MkdirTemp("", "release-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ref, idx, err := images.Load(tarball, tmp)
	if err != nil {
		return "", err
	}
	if want := o.Registry + "/" + im.Name + ":" + o.Version; ref != want {
		return "", fmt.Errorf("%s names the image %s, want %s (make images IMAGE_REPO=%s IMAGE_TAG=%s)", tarball, ref, want, o.Registry, o.Version)
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add:        idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{"org.opencontainers.image.ref.name": o.Version}},
	})
	if _, err := layout.Write(filepath.Join(o.Out, "images", im.Name), top); err != nil {
		return "", err
	}
	if err := copyFile(tarball, filepath.Join(o.Out, "images", im.Name+".tar")); err != nil {
		return "", err
	}
	return digest.String(), os.WriteFile(filepath.Join(o.Out, "images", im.Name+".digest"), []byte(digest.String()+"\n"), 0o644)
}

// An SPDX 2.3 document (https://spdx.github.io/spdx-spec/v2.3/), the fields this
// release fills in.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string       `json:"name"`
	SPDXID           string       `json:"SPDXID"`
	VersionInfo      string       `json:"versionInfo,omitempty"`
	DownloadLocation string       `json:"downloadLocation"`
	FilesAnalyzed    bool         `json:"filesAnalyzed"`
	LicenseConcluded string       `json:"licenseConcluded,omitempty"`
	LicenseDeclared  string       `json:"licenseDeclared,omitempty"`
	CopyrightText    string       `json:"copyrightText,omitempty"`
	Checksums        []spdxSum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExtRef `json:"externalRefs,omitempty"`
	PrimaryPurpose   string       `json:"primaryPackagePurpose,omitempty"`
	Supplier         string       `json:"supplier,omitempty"`
	Comment          string       `json:"comment,omitempty"`
}

type spdxSum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExtRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]`)

func spdxID(s string) string { return "SPDXRef-" + spdxIDChars.ReplaceAllString(s, "-") }

// writeSBOM writes an SPDX SBOM of the image: the image itself (by digest), each Go
// binary it carries with the Go toolchain and every module linked into it, as the
// binary's build information records them (what `go version -m` prints), and the
// CNI plugin's C front, which links no library.
func writeSBOM(o Options, im images.Image, digest string) error {
	imageID := spdxID("image-" + im.Name)
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              im.Name + "@" + digest,
		DocumentNamespace: "https://github.com/nicpool/nicpool/releases/" + o.Version + "/sbom/" + im.Name + "/" + strings.TrimPrefix(digest, "sha256:"),
		CreationInfo:      spdxCreation{Created: o.Created.Format(time.RFC3339), Creators: []string{"Tool: nicpool-hack-release-" + o.Version, "Organization: nicpool"}},
	}
	repo := o.Registry + "/" + im.Name
	doc.Packages = append(doc.Packages, spdxPackage{
		Name: im.Name, SPDXID: imageID, VersionInfo: o.Version, DownloadLocation: "NOASSERTION",
		LicenseDeclared: "Apache-2.0", PrimaryPurpose: "CONTAINER",
		Checksums: []spdxSum{{"SHA256", strings.TrimPrefix(digest, "sha256:")}},
		ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl",
			"pkg:oci/" + im.Name + "@" + strings.ReplaceAll(digest, ":", "%3A") + "?repository_url=" + repo + "&tag=" + o.Version}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID})
	seen := map[string]bool{}
	add := func(p spdxPackage, parent string) {
		if !seen[p.SPDXID] {
			seen[p.SPDXID] = true
			doc.Packages = append(doc.Packages, p)
		}
		doc.Relationships = append(doc.Relationships, spdxRelationship{parent, "CONTAINS", p.SPDXID})
	}
	for _, f := range im.Files() {
		bin := filepath.Join(o.Bin, f.Binary)
		data, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fileID := spdxID("binary-" + f.Binary)
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			// The C front: one source file, no library.
			add(spdxPackage{Name: f.Binary, SPDXID: fileID, VersionInfo: o.Version, DownloadLocation: "https://github.com/nicpool/nicpool",
				LicenseDeclared: "Apache-2.0", PrimaryPurpose: "APPLICATION", Checksums: []spdxSum{{"SHA256", hex.EncodeToString(sum[:])}},
				Comment: "the CNI plugin's front, compiled from cniplugin/front/nicpool.c; it links no C library. Checksum of the " + hostPlatform() + " binary."}, imageID)
			continue
		}
		add(spdxPackage{Name: f.Binary, SPDXID: fileID, VersionInfo: o.Version, DownloadLocation: "https://github.com/nicpool/nicpool",
			LicenseDeclared: "Apache-2.0", PrimaryPurpose: "APPLICATION", Checksums: []spdxSum{{"SHA256", hex.EncodeToString(sum[:])}},
			ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + bi.Main.Path + "@" + o.Version}},
			Comment:      "Go binary " + bi.Path + ". Checksum of the " + hostPlatform() + " binary."}, imageID)
		add(spdxPackage{Name: "go", SPDXID: spdxID("go-" + bi.GoVersion), VersionInfo: strings.TrimPrefix(bi.GoVersion, "go"),
			DownloadLocation: "https://go.dev/dl/", LicenseDeclared: "BSD-3-Clause",
			ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + bi.GoVersion}}}, fileID)
		for _, m := range bi.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			add(spdxPackage{Name: m.Path, SPDXID: spdxID("gomod-" + m.Path + "-" + m.Version), VersionInfo: m.Version,
				DownloadLocation: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip", LicenseDeclared: "NOASSERTION",
				ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + m.Path + "@" + m.Version}},
				Comment:      "go.sum " + m.Sum}, fileID)
		}
	}
	j, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Out, "sbom", im.Name+".spdx.json"), append(j, '\n'), 0o644)
}

func hostPlatform() string { return images.HostPlatform().String() }

// imageKeys are the chart's images.<key> of each product image.
var imageKeys = map[string]string{"nicpool": "plugin", "nicpool-ipamd": "ipamd", "nicpool-webhook": "webhook"}

// writeChart packages the chart with the release's version and its images pinned.
func writeChart(o Options, digests map[string]string) error {
	ch, err := loader.Load(filepath.Join(o.Root, manifests.ChartDir))
	if err != nil {
		return err
	}
	ch.Metadata.Version = strings.TrimPrefix(o.Version, "v")
	ch.Metadata.AppVersion = o.Version
	for _, dep := range ch.Metadata.Dependencies {
		dep.Version = ch.Metadata.Version
	}
	for _, sub := range ch.Dependencies() {
		sub.Metadata.Version = ch.Metadata.Version
		sub.Metadata.AppVersion = o.Version
	}
	imgs, _ := ch.Values["images"].(map[string]any)
	if imgs == nil {
		return fmt.Errorf("the chart has no images values")
	}
	imgs["registry"] = o.Registry
	imgs["tag"] = o.Version
	for name, key := range imageKeys {
		v, _ := imgs[key].(map[string]any)
		if v == nil {
			return fmt.Errorf("the chart has no images.%s", key)
		}
		v["digest"] = digests[name]
	}
	// values.yaml as the chart's users read it, with the pinned values.
	raw, err := yaml.Marshal(ch.Values)
	if err != nil {
		return err
	}
	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			f.Data = append([]byte("# nicpool "+o.Version+": the images are pinned by digest.\n"), raw...)
		}
	}
	_, err = chartutil.Save(ch, o.Out)
	return err
}

// writeInstallYAML renders the kustomizations with the images pinned by digest.
func writeInstallYAML(o Options, digests map[string]string) error {
	for _, k := range []struct{ dir, file string }{
		{".", "nicpool-" + o.Version + ".yaml"},
		{"overlays/self-managed", "nicpool-" + o.Version + "-self-managed.yaml"},
	} {
		objs, err := manifests.Render(filepath.Join(o.Root, manifests.Dir, k.dir))
		if err != nil {
			return err
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "# nicpool %s: `kubectl apply -f` of manifests/%s, images pinned by digest.\n", o.Version, k.dir)
		for _, obj := range objs {
			if err := pinImages(obj, o, digests); err != nil {
				return err
			}
			y, err := yaml.Marshal(obj.Object)
			if err != nil {
				return err
			}
			b.WriteString("---\n")
			b.Write(y)
		}
		if err := os.WriteFile(filepath.Join(o.Out, k.file), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func pinImages(obj *unstructured.Unstructured, o Options, digests map[string]string) error {
	if obj.GetKind() != "Deployment" && obj.GetKind() != "DaemonSet" {
		return nil
	}
	for _, list := range []string{"containers", "initContainers"} {
		cs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", list)
		for _, c := range cs {
			c := c.(map[string]any)
			image, _ := c["image"].(string)
			ref, _, _ := strings.Cut(image, ":")
			name := strings.TrimPrefix(ref, o.Registry+"/")
			d, ok := digests[name]
			if !ok {
				return fmt.Errorf("%s %s runs %s, not an image of the release", obj.GetKind(), obj.GetName(), image)
			}
			c["image"] = o.Registry + "/" + name + ":" + o.Version + "@" + d
		}
		if len(cs) > 0 {
			if err := unstructured.SetNestedSlice(obj.Object, cs, "spec", "template", "spec", list); err != nil {
				return err
			}
		}
	}
	return nil
}

// writePlugin writes a kubectl-nicpool archive per platform and the krew manifest
// naming them.
func writePlugin(o Options) error {
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return err
	}
	sums := map[string]string{}
	for _, p := range o.Platforms {
		goos, arch, _ := strings.Cut(p, "/")
		bin := "kubectl-nicpool"
		if goos == "windows" {
			bin += ".exe"
		}
		data, err := os.ReadFile(filepath.Join(o.Bin, goos+"_"+arch, bin))
		if err != nil {
			return fmt.Errorf("%w (make release cross-builds it)", err)
		}
		var buf bytes.Buffer
		gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		gz.ModTime = o.Created
		tw := tar.NewWriter(gz)
		for _, f := range []struct {
			name string
			mode int64
			data []byte
		}{{bin, 0o755, data}, {"LICENSE", 0o644, license}} {
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: o.Created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
				return err
			}
			if _, err := tw.Write(f.data); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		name := "kubectl-nicpool_" + goos + "_" + arch + ".tar.gz"
		if err := os.WriteFile(filepath.Join(o.Out, name), buf.Bytes(), 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(buf.Bytes())
		sums[goos+"/"+arch] = hex.EncodeToString(sum[:])
	}
	return writeKrew(o, sums)
}

// writeKrew fills in docs/kubectl-nicpool.krew.yaml: the version, and each
// platform's archive address and sha256.
func writeKrew(o Options, sums map[string]string) error {
	tmpl, err := os.ReadFile(filepath.Join(o.Root, "docs", "kubectl-nicpool.krew.yaml"))
	if err != nil {
		return err
	}
	var m map[string]any
	if err := yaml.Unmarshal(tmpl, &m); err != nil {
		return err
	}
	spec, _ := m["spec"].(map[string]any)
	spec["version"] = o.Version
	platforms, _ := spec["platforms"].([]any)
	if !slices.Equal(o.Platforms, PluginPlatforms) {
		// A test's release of fewer platforms: its manifest lists those.
		var built []any
		for _, p := range platforms {
			sel, _, _ := unstructured.NestedStringMap(p.(map[string]any), "selector", "matchLabels")
			if _, ok := sums[sel["os"]+"/"+sel["arch"]]; ok {
				built = append(built, p)
			}
		}
		platforms = built
		spec["platforms"] = built
	}
	if len(platforms) != len(sums) {
		return fmt.Errorf("the krew manifest lists %d platforms, the release builds %d", len(platforms), len(sums))
	}
	for _, p := range platforms {
		p := p.(map[string]any)
		sel, _, _ := unstructured.NestedStringMap(p, "selector", "matchLabels")
		key := sel["os"] + "/" + sel["arch"]
		sum, ok := sums[key]
		if !ok {
			return fmt.Errorf("the krew manifest lists %s, which the release does not build", key)
		}
		p["sha256"] = sum
		p["uri"] = "https://github.com/nicpool/nicpool/releases/download/" + o.Version + "/kubectl-nicpool_" + sel["os"] + "_" + sel["arch"] + ".tar.gz"
	}
	y, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Out, "kubectl-nicpool.krew.yaml"), y, 0o644)
}

// writeChecksums writes SHA256SUMS (sha256sum's format) of every file of the
// release; the OCI layouts are covered by their own digests.
func writeChecksums(out string) error {
	var lines []string
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		if d.IsDir() {
			if filepath.Dir(rel) == "images" {
				return fs.SkipDir
			}
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		lines = append(lines, hex.EncodeToString(h.Sum(nil))+"  "+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][66:] < lines[j][66:] })
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
