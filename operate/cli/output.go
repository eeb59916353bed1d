package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// output is the -o flag of a command.
type output struct{ format string }

func (p *output) addFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&p.format, "output", "o", "", "output format: json, yaml or wide (default: a table)")
}

func (p *output) validate() error {
	switch p.format {
	case outputTable, outputWide, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("--output %q: must be one of json, yaml, wide, or empty for a table", p.format)
}

// structured reports whether the answer is printed as data, not as a table.
func (p *output) structured() bool { return p.format == outputJSON || p.format == outputYAML }

// print writes v as JSON or YAML.
func (p *output) print(w io.Writer, v any) error {
	var data []byte
	var err error
	if p.format == outputJSON {
		data, err = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// column is a table column; wide columns show only with -o wide.
type column struct {
	name string
	wide bool
}

// table prints rows under columns as kubectl prints tables.
func (p *output) table(w io.Writer, cols []column, rows [][]any) error {
	t := &metav1.Table{}
	for _, c := range cols {
		def := metav1.TableColumnDefinition{Name: c.name, Type: "string"}
		if c.wide {
			def.Priority = 1
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, def)
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: r})
	}
	tw := printers.GetNewTabWriter(w)
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: p.format == outputWide}).PrintObj(t, tw); err != nil {
		return err
	}
	return tw.Flush()
}

// orDash prints an empty cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
