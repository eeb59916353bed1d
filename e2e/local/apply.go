package local

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Apply creates every object of the given YAML files, in order; objects that exist
// already are left as they are.
func (s *Stack) Apply(ctx context.Context, files ...string) ([]string, error) {
	var created []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return created, err
		}
		objs, err := Decode(data)
		if err != nil {
			return created, fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if o.GetNamespace() == "" && o.GetKind() != "SpiderIPPool" && o.GetKind() != "Namespace" {
				o.SetNamespace("default")
			}
			if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return created, fmt.Errorf("%s: create %s %s: %w", f, o.GetKind(), o.GetName(), err)
			}
			created = append(created, o.GetKind()+"/"+o.GetName())
		}
	}
	return created, nil
}

// Decode splits a multi-document YAML stream into objects, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
}
