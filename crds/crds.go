// Package crds embeds the CustomResourceDefinitions generated from crds/api (by
// `make generate`), so tests, the local cluster and the manifests install exactly the
// checked-in schema.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed yaml/*.yaml
var files embed.FS

// Dir is the repository path of the generated YAML, relative to the module root.
const Dir = "crds/yaml"

// FS returns the generated CRD YAML files.
func FS() fs.FS {
	sub, err := fs.Sub(files, "yaml")
	if err != nil {
		panic(err)
	}
	return sub
}

// Definitions decodes every embedded CRD.
func Definitions() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(files, "yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		data, err := files.ReadFile(path.Join("yaml", e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decode %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}
