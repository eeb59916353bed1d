package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Load reads a tarball that Build wrote, unpacking it under dir: the name containerd
// gives it on import and its image index.
func Load(file, dir string) (string, v1.ImageIndex, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	if err := Unpack(f, dir); err != nil {
		return "", nil, fmt.Errorf("%s: %w", file, err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return "", nil, err
	}
	if len(m.Manifests) != 1 {
		return "", nil, fmt.Errorf("%s: index.json lists %d images, want 1", file, len(m.Manifests))
	}
	desc := m.Manifests[0]
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return "", nil, err
	}
	return desc.Annotations[containerdName], idx, nil
}

// Name is the name containerd gives the image of a tarball that Build wrote when it
// imports it (registry/repository:tag), read from the tarball's index.json alone.
func Name(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: no index.json: not an OCI image layout", file)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		if path.Clean(h.Name) != "index.json" {
			continue
		}
		var m v1.IndexManifest
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", file, err)
		}
		if len(m.Manifests) != 1 || m.Manifests[0].Annotations[containerdName] == "" {
			return "", fmt.Errorf("%s: index.json names no one image (%d entries)", file, len(m.Manifests))
		}
		return m.Manifests[0].Annotations[containerdName], nil
	}
}

// ImageFor is the image of idx for platform p.
func ImageFor(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Equals(p) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s", p)
}

// Unpack writes the directories, regular files and symbolic links of a tar stream
// under dir, with their modes; any other kind of entry, a path leaving dir, or a link
// pointing out of it is an error (the images and their layouts hold nothing else).
func Unpack(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves %s", h.Name, dir)
		}
		mode := h.FileInfo().Mode().Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			// A link points at a file unpacked before it, never at a directory or
			// another link: nothing written later goes through a link out of dir.
			to, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(target), filepath.FromSlash(h.Linkname)))
			var st os.FileInfo
			if err == nil {
				st, err = os.Lstat(to)
			}
			root, rerr := filepath.EvalSymlinks(dir)
			if filepath.IsAbs(h.Linkname) || err != nil || rerr != nil || !st.Mode().IsRegular() ||
				!strings.HasPrefix(to, root+string(filepath.Separator)) {
				return fmt.Errorf("link %q -> %q: want a file unpacked before it in %s", h.Name, h.Linkname, dir)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q is not a file, directory or symbolic link", h.Name)
		}
	}
}
