// Command images builds nicpool's images as OCI tarballs without Docker (`make
// images`): the binaries come from bin/ as `make build` makes them.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/nicpool/nicpool/hack/images"
)

func main() {
	var (
		opts      images.Options
		platforms = flag.String("platforms", strings.Join(images.DefaultPlatforms, ","), "comma-separated os/arch list of every image index")
	)
	flag.StringVar(&opts.BinDir, "bin", "bin", "directory of the binaries (other platforms under <os>_<arch>/)")
	flag.StringVar(&opts.OutDir, "out", "dist/images", "directory receiving <image>.tar")
	flag.StringVar(&opts.Repo, "repo", "nicpool", "repository of the product images")
	flag.StringVar(&opts.Tag, "tag", "dev", "tag of the product images")
	flag.StringVar(&opts.Ref, "ref", "", "whole reference of the one image named (overrides -repo and -tag)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: images [flags] [image...]   (images: nicpool nicpool-ipamd nicpool-webhook pause busybox; default the first three)\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	opts.Platforms = strings.Split(*platforms, ",")
	opts.Names = flag.Args()
	built, err := images.Build(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	for _, b := range built {
		fmt.Printf("%s\t%s\t%s\n", b.Ref, b.Path, b.Digest)
	}
}
