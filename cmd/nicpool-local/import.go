package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nicpool/nicpool/e2e/kubelet"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// importImages imports image archives into every real node of the cluster of dir
// (`make up NODE=kubelet`), as a registry pull would make them available.
func importImages(ctx context.Context, dir string, archives []string) error {
	if len(archives) == 0 {
		return fmt.Errorf("import: name the image archives to import")
	}
	nodes, err := filepath.Glob(filepath.Join(dir, "nodes", "*", "run", "containerd", "containerd.sock"))
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no real node in %s: `make up NODE=kubelet` first", dir)
	}
	ctr := filepath.Join(testenv.BinDir(), "ctr")
	if self, err := os.Executable(); err == nil {
		if c := filepath.Join(filepath.Dir(self), "ctr"); fileExists(c) {
			ctr = c
		}
	}
	for _, sock := range nodes {
		root := filepath.Dir(filepath.Dir(filepath.Dir(sock)))
		for _, a := range archives {
			if err := kubelet.Import(ctx, ctr, root, a); err != nil {
				return err
			}
			fmt.Printf("%s: imported %s\n", filepath.Base(root), a)
		}
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
