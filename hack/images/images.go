// Package images builds nicpool's container images without Docker or a registry: each
// image is one layer holding its static binaries at the paths its Dockerfile (build/)
// puts them, with the Dockerfile's entrypoint, user and labels, for every platform asked for,
// written as an OCI image-layout tarball that `ctr images import`, `kind load
// image-archive` and `docker load` accept.
package images

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Image is the layout of one image. For the product images it mirrors
// build/<Name>.Dockerfile (manifests/dockerfile_test.go compares the two).
type Image struct {
	// Name is the image's name under the repository (nicpool/<Name>).
	Name string
	// Binary is the file under the binaries directory that the image carries.
	Binary string
	// Path is where the image holds the binary; it is also the entrypoint.
	Path string
	// Beside are more files of the binaries directory the image carries, in Path's
	// directory under their own names (the CNI plugin's front, which execs the Go
	// plugin from the directory of its own executable).
	Beside []string
	// User is the image's USER ("" runs as root).
	User string
	// Description is the image's org.opencontainers.image.description label.
	Description string
	// Ref, when set, is the image's fixed reference (the pause image is known to the
	// container runtime by the upstream name).
	Ref string
	// Links are more paths in the image, each a symbolic link to Path (a multi-call
	// binary's commands).
	Links []string
	// License is the SPDX identifier of what the image carries (default License).
	License string
	// Cmd, when set, is the image's CMD, and the image has no ENTRYPOINT: a container
	// runs the command its pod gives, else Cmd.
	Cmd []string
}

// Source is the org.opencontainers.image.source label of every image.
const Source = "https://github.com/nicpool/nicpool"

// License is the org.opencontainers.image.licenses label of every image but one that
// says otherwise: the SPDX identifier of the repository's LICENSE.
const License = "Apache-2.0"

// Product are the images nicpool ships, one per build/<Name>.Dockerfile.
var Product = []Image{
	{
		Name:        "nicpool",
		Binary:      "nicpool-cni",
		Path:        "/opt/nicpool/nicpool-cni",
		Beside:      []string{"nicpool"},
		Description: "nicpool CNI IPAM plugin, the Go plugin nicpool-cni and its front nicpool; the ipamd DaemonSet's init container installs both into the node's CNI bin directory",
	},
	{
		Name:        "nicpool-ipamd",
		Binary:      "nicpool-ipamd",
		Path:        "/usr/local/bin/nicpool-ipamd",
		Description: "nicpool node IPAM daemon, serving the CNI plugin on a unix socket",
	},
	{
		Name:        "nicpool-webhook",
		Binary:      "nicpool-webhook",
		Path:        "/usr/local/bin/nicpool-webhook",
		User:        "65532:65532",
		Description: "nicpool admission webhook and cluster controllers",
	},
}

// Pause is the sandbox image of local nodes (no registry to pull it from): a static
// binary that holds the pod's namespaces, reaps orphans and exits when signalled, run
// as the user of the upstream image it stands in for.
var Pause = Image{
	Name:        "pause",
	Binary:      "pause",
	Path:        "/pause",
	User:        "65535:65535",
	Description: "pod sandbox for local nodes, built from nicpool's hack/images/pause",
	Ref:         "registry.k8s.io/pause:3.10",
}

// BusyboxAsAlpine is no Alpine image: it is BusyBox, Debian's static build of it
// (the busybox-static package), named docker.io/library/alpine:latest because that is
// the image spiderpool's own end-to-end specs run ("alpine", pulled only if not
// present), and the local kubelet nodes reach no registry to pull Alpine from. It
// carries the commands those specs' containers run (sh and ash, sleep, nc, ip; the
// shell pipes that follow a `kubectl exec` run on the host) and a small toolbox for a
// person's `kubectl exec`, at the paths Alpine has them, with Alpine's CMD. Only the
// spiderpool harness builds it (`make spiderpool-image`), for this machine's platform.
var BusyboxAsAlpine = Image{
	Name:   "busybox",
	Binary: "busybox",
	Path:   "/bin/busybox",
	Links: []string{
		"/bin/sh", "/bin/ash", "/bin/sleep", "/bin/cat", "/bin/echo", "/bin/ls", "/bin/ps",
		"/bin/grep", "/bin/hostname", "/bin/ping", "/bin/ping6", "/bin/true", "/bin/false",
		"/bin/kill", "/bin/mkdir", "/bin/rm", "/sbin/ip", "/sbin/ifconfig", "/sbin/route",
		"/usr/bin/nc", "/usr/bin/awk", "/usr/bin/env", "/usr/bin/head", "/usr/bin/tail",
		"/usr/bin/wc", "/usr/bin/wget", "/usr/bin/nslookup", "/usr/bin/traceroute",
	},
	Cmd:         []string{"/bin/sh"},
	License:     "GPL-2.0-only",
	Description: "BusyBox (Debian's busybox-static), not Alpine: named alpine:latest for spiderpool's end-to-end specs on nicpool's local nodes, which pull from no registry",
	Ref:         "docker.io/library/alpine:latest",
}

// All are the images Build knows.
func All() []Image { return append(slices.Clone(Product), Pause, BusyboxAsAlpine) }

// Lookup returns the image called name.
func Lookup(name string) (Image, error) {
	for _, im := range All() {
		if im.Name == name {
			return im, nil
		}
	}
	var names []string
	for _, im := range All() {
		names = append(names, im.Name)
	}
	return Image{}, fmt.Errorf("unknown image %q: want one of %s", name, strings.Join(names, ", "))
}

// File is one binary of an image: the file Binary of the binaries directory, held at
// Path.
type File struct{ Binary, Path string }

// Files are the binaries the image carries, the entrypoint's first.
func (im Image) Files() []File {
	files := []File{{im.Binary, im.Path}}
	for _, b := range im.Beside {
		files = append(files, File{b, path.Join(path.Dir(im.Path), b)})
	}
	return files
}

// Entrypoint is the image's ENTRYPOINT: Path, unless the image has a Cmd instead.
func (im Image) Entrypoint() []string {
	if im.Cmd != nil {
		return nil
	}
	return []string{im.Path}
}

// Labels are the image's OCI labels.
func (im Image) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       im.Name,
		"org.opencontainers.image.description": im.Description,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.licenses":    cmp.Or(im.License, License),
	}
}

// DefaultPath is the PATH of an image built FROM scratch: BuildKit sets it when the
// base sets none, and Build does the same so both builds have the same environment.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
