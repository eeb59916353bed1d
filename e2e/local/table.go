package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// GetTable asks the API server for the server-side table of a resource — the same
// columns `kubectl get` prints — and returns it.
func GetTable(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, namespace string) (*metav1.Table, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}
	c.APIPath = "/apis"
	if gvr.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	req := rc.Get().Resource(gvr.Resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if namespace != "" {
		req = req.Namespace(namespace)
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s table: %w", gvr.Resource, err)
	}
	t := &metav1.Table{}
	if err := json.Unmarshal(raw, t); err != nil {
		return nil, fmt.Errorf("decode %s table: %w", gvr.Resource, err)
	}
	return t, nil
}

// PrintTable writes a table as kubectl does: upper-case headers, priority-0 columns.
func PrintTable(w io.Writer, t *metav1.Table) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var cols []int
	var head []string
	for i, c := range t.ColumnDefinitions {
		if c.Priority == 0 {
			cols = append(cols, i)
			head = append(head, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range t.Rows {
		cells := make([]string, 0, len(cols))
		for _, i := range cols {
			v := ""
			if i < len(r.Cells) && r.Cells[i] != nil {
				v = fmt.Sprint(r.Cells[i])
			}
			cells = append(cells, v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
