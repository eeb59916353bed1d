package manifests_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nicpool/nicpool/manifests"
)

// The checked-in CRDs and webhook configurations are what their Go sources
// generate: a change to crds/ or webhook/admission/configs without `make manifests` fails here.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := manifests.Generated()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("nothing generated")
	}
	for path, want := range files {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v; run `make manifests`", filepath.Join(manifests.Dir, path), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale; run `make manifests` and commit the result", filepath.Join(manifests.Dir, path))
		}
	}
	// A CRD removed from crds/yaml must not linger in the base.
	entries, err := os.ReadDir(filepath.Join("base", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[filepath.Join("base", "crds", e.Name())]; !ok {
			t.Errorf("%s is not generated from crds/yaml any more; delete it", filepath.Join(manifests.Dir, "base", "crds", e.Name()))
		}
	}
}

// The Helm chart is what the kustomizations render: a change to manifests/ without
// `make manifests` fails here, and so does a file the generator no longer writes.
func TestChartIsCurrent(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := manifests.Chart(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, manifests.ChartDir)
	for _, p := range manifests.ChartFiles(files) {
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Errorf("%s: %v; run `make manifests`", filepath.Join(manifests.ChartDir, p), err)
			continue
		}
		if !bytes.Equal(got, files[p]) {
			t.Errorf("%s is stale; run `make manifests` and commit the result", filepath.Join(manifests.ChartDir, p))
		}
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if _, ok := files[rel]; !ok {
			t.Errorf("%s is not generated; delete it or generate it", filepath.Join(manifests.ChartDir, rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
