package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options of one Build.
type Options struct {
	// BinDir holds the binaries: BinDir/<binary> for the host's platform (what `make
	// build` makes), BinDir/<os>_<arch>/<binary> for the others.
	BinDir string
	// OutDir receives <name>.tar per image.
	OutDir string
	// Repo and Tag name the product images Repo/<name>:Tag (default nicpool, dev).
	Repo, Tag string
	// Ref, with exactly one image, is its whole reference instead (Tilt's EXPECTED_REF).
	Ref string
	// Platforms, as os/arch[/variant] (default linux/amd64 and linux/arm64).
	Platforms []string
	// Names of the images to build (default the product images).
	Names []string
	// Created is every timestamp in the images (default SOURCE_DATE_EPOCH, else the
	// Unix epoch): the same binaries always make the same image digest.
	Created time.Time
}

// Built is one image tarball.
type Built struct {
	Name string
	// Ref is the reference the tarball names the image by.
	Ref string
	// Path is the tarball.
	Path string
	// Digest is the digest of the image index.
	Digest v1.Hash
}

// DefaultPlatforms are the platforms of `make images`.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Build writes one OCI image-layout tarball per image of opts.Names into opts.OutDir.
func Build(opts Options) ([]Built, error) {
	if opts.Repo == "" {
		opts.Repo = "nicpool"
	}
	if opts.Tag == "" {
		opts.Tag = "dev"
	}
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	if len(opts.Names) == 0 {
		for _, im := range Product {
			opts.Names = append(opts.Names, im.Name)
		}
	}
	if opts.Ref != "" && len(opts.Names) != 1 {
		return nil, fmt.Errorf("a reference (%s) names one image, not %d", opts.Ref, len(opts.Names))
	}
	if opts.Created.IsZero() {
		created, err := sourceDateEpoch()
		if err != nil {
			return nil, err
		}
		opts.Created = created
	}
	platforms, err := parsePlatforms(opts.Platforms)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	var out []Built
	for _, n := range opts.Names {
		im, err := Lookup(n)
		if err != nil {
			return nil, err
		}
		ref := im.Ref
		switch {
		case opts.Ref != "":
			ref = opts.Ref
		case ref == "":
			ref = opts.Repo + "/" + im.Name + ":" + opts.Tag
		}
		idx, err := im.Index(platforms, opts.BinDir, opts.Created)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.Name, err)
		}
		file := filepath.Join(opts.OutDir, im.Name+".tar")
		if err := WriteTarball(file, ref, idx, opts.Created); err != nil {
			return nil, fmt.Errorf("image %s: %w", im.Name, err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, Built{Name: im.Name, Ref: ref, Path: file, Digest: digest})
	}
	return out, nil
}

func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	var sec int64
	if _, err := fmt.Sscan(s, &sec); err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the Unix epoch", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func parsePlatforms(specs []string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, s := range specs {
		p, err := v1.ParsePlatform(s)
		if err != nil {
			return nil, err
		}
		if p.OS != "linux" || p.Architecture == "" {
			return nil, fmt.Errorf("platform %q: want linux/<arch>[/<variant>]", s)
		}
		out = append(out, *p)
	}
	return out, nil
}

// HostPlatform is the platform of the binaries `make build` makes.
func HostPlatform() v1.Platform {
	return v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
}

// BinaryPath is where `make images` puts binary for platform p under binDir.
func BinaryPath(binDir string, p v1.Platform, binary string) string {
	host := HostPlatform()
	if p.OS == host.OS && p.Architecture == host.Architecture && p.Variant == "" {
		return filepath.Join(binDir, binary)
	}
	dir := p.OS + "_" + p.Architecture
	if p.Variant != "" {
		dir += "_" + p.Variant
	}
	return filepath.Join(binDir, dir, binary)
}

// Index is the image for every platform, each built from the binaries of binDir for
// that platform (BinaryPath).
func (im Image) Index(platforms []v1.Platform, binDir string, created time.Time) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, err := im.ForPlatform(p, binDir, created)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// ForPlatform is the image for platform p, carrying the binaries of binDir for p.
func (im Image) ForPlatform(p v1.Platform, binDir string, created time.Time) (v1.Image, error) {
	var files []layerFile
	var copies []string
	for _, f := range im.Files() {
		binary := BinaryPath(binDir, p, f.Binary)
		if err := CheckStatic(binary, p); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(binary)
		if err != nil {
			return nil, err
		}
		files = append(files, layerFile{path: f.Path, data: data})
		copies = append(copies, fmt.Sprintf("COPY %s %s", f.Binary, f.Path))
	}
	for _, l := range im.Links {
		target, err := filepath.Rel(path.Dir(l), im.Path)
		if err != nil {
			return nil, err
		}
		files = append(files, layerFile{path: l, link: filepath.ToSlash(target)})
		copies = append(copies, fmt.Sprintf("ln -s %s %s", target, l))
	}
	layerTar, err := fileLayer(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: strings.Join(copies, "; ") + " # hack/images",
		},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{
		Entrypoint: im.Entrypoint(),
		Cmd:        im.Cmd,
		User:       im.User,
		Env:        []string{"PATH=" + DefaultPath},
		Labels:     im.Labels(),
	}
	return mutate.ConfigFile(img, cfg)
}

// layerFile is one executable of a layer: its absolute path and content, or the
// target of the symbolic link it is.
type layerFile struct {
	path string
	data []byte
	link string
}

// fileLayer is a layer tar holding each file as an executable (or a symbolic link),
// with their parent directories, owned by root, as a Dockerfile's COPY (and `ln -s`)
// makes them.
func fileLayer(files []layerFile, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean(f.path), "/")
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/") + "/"
			if dirs[dir] {
				continue
			}
			dirs[dir] = true
			if err := tw.WriteHeader(&tar.Header{
				Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime,
			}); err != nil {
				return nil, err
			}
		}
		if f.link != "" {
			if err := tw.WriteHeader(&tar.Header{
				Typeflag: tar.TypeSymlink, Name: rel, Linkname: f.link, Mode: 0o777, ModTime: mtime,
			}); err != nil {
				return nil, err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: rel, Mode: 0o755, Size: int64(len(f.data)), ModTime: mtime,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var machines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// ErrNotStatic is returned for a binary that needs a dynamic loader: the images have
// no libc.
var ErrNotStatic = errors.New("dynamically linked")

// CheckStatic fails unless binary is a statically linked ELF executable for p.
func CheckStatic(binary string, p v1.Platform) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("%s: %w (build it with `make images`, which builds every platform)", binary, err)
	}
	defer f.Close()
	if want, ok := machines[p.Architecture]; !ok || f.Machine != want {
		return fmt.Errorf("%s is built for %s, not %s", binary, f.Machine, p)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is %w: build it static, as `make build` does (Go with CGO_ENABLED=0, C with -static)", binary, ErrNotStatic)
		}
	}
	return nil
}

// ContainerdName is ref as containerd and the kubelet name it (docker.io/… for short
// names), the name `ctr images import` gives the image.
func ContainerdName(ref string) (string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	repo := tag.RepositoryStr()
	registry := tag.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	return registry + "/" + repo + ":" + tag.TagStr(), nil
}

// containerdName is the annotation of an image layout's index.json that names the
// image containerd imports (`ctr images import`).
const containerdName = "io.containerd.image.name"

// WriteTarball writes idx as an OCI image layout in a tar file, its index.json naming
// it ref in the annotations containerd (io.containerd.image.name) and the OCI spec
// (org.opencontainers.image.ref.name, the tag) read on import.
func WriteTarball(file, ref string, idx v1.ImageIndex, mtime time.Time) error {
	full, err := ContainerdName(ref)
	if err != nil {
		return err
	}
	tag, _ := name.NewTag(ref)
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			containerdName:                      full,
			"org.opencontainers.image.ref.name": tag.TagStr(),
		}},
	})
	dir, err := os.MkdirTemp(filepath.Dir(file), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := layout.Write(dir, top); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := tarDir(tmp, dir, mtime); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// tarDir writes the tree under dir to file, in name order, with fixed owners, modes
// and times: the same layout always makes the same bytes.
func tarDir(file, dir string, mtime time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(paths)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		st, err := os.Stat(p)
		if err != nil {
			f.Close()
			return err
		}
		h := &tar.Header{Name: rel, ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size()}
		if st.IsDir() {
			h = &tar.Header{Name: rel + "/", ModTime: mtime, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if !st.IsDir() {
			src, err := os.Open(p)
			if err != nil {
				f.Close()
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
