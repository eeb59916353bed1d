package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
)

// Output formats of -o that print a table.
const (
	outputTable = ""
	outputWide  = "wide"
)

// output is the -o flag of a command and the flags of its printers: cli-runtime's
// (json, yaml, name, go-template, jsonpath and their -file forms) and kubectl's
// custom-columns, which print the command's versioned list (operate/output); a table
// by default, with more columns for wide.
type outputFlags struct {
	format   string
	print    *genericclioptions.PrintFlags
	columns  *get.CustomColumnsPrintFlags
	noHeader bool
}

func newOutput() *outputFlags {
	o := &outputFlags{print: genericclioptions.NewPrintFlags(""), columns: &get.CustomColumnsPrintFlags{}}
	o.print.OutputFormat = &o.format
	return o
}

func (p *outputFlags) formats() []string {
	return append(append([]string{outputWide}, p.print.AllowedFormats()...), "custom-columns=COLUMNS", "custom-columns-file=FILE")
}

func (p *outputFlags) addFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&p.format, "output", "o", "", "output format: "+strings.Join(p.formats(), ", ")+" (default: a table)")
	p.print.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().BoolVar(&p.noHeader, "no-headers", false, "print no header line (tables and custom-columns)")
	p.print.OutputFlagSpecified = func() bool { return cmd.Flag("output").Changed }
}

// table reports whether the answer is printed as the command's table.
func (p *outputFlags) table() bool {
	return (p.format == outputTable || p.format == outputWide) && (p.print.TemplatePrinterFlags.TemplateArgument == nil || *p.print.TemplatePrinterFlags.TemplateArgument == "")
}

// printer is the printer of a format other than the table's.
func (p *outputFlags) printer() (printers.ResourcePrinter, error) {
	if strings.HasPrefix(p.format, "custom-columns") {
		p.columns.NoHeaders = p.noHeader
		return p.columns.ToPrinter(p.format)
	}
	pr, err := p.print.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("--output %q: must be one of %s, or empty for a table", p.format, strings.Join(p.formats(), ", "))
	}
	return pr, err
}

// validate fails on a format that prints nothing, before the command does its work.
func (p *outputFlags) validate() error {
	if p.table() {
		return nil
	}
	_, err := p.printer()
	return err
}

// object prints list with the printer of -o.
func (p *outputFlags) object(w io.Writer, list runtime.Object) error {
	pr, err := p.printer()
	if err != nil {
		return err
	}
	if p.format == "name" && meta.IsListType(list) {
		// The name printer takes items one by one, as kubectl get hands them over.
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := pr.PrintObj(it, w); err != nil {
				return err
			}
		}
		return nil
	}
	return pr.PrintObj(list, w)
}

// column is a table column; wide columns show only with -o wide.
type column struct {
	name string
	wide bool
}

// tabulate prints rows under columns as kubectl prints tables.
func (p *outputFlags) tabulate(w io.Writer, cols []column, rows [][]any) error {
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
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: p.format == outputWide, NoHeaders: p.noHeader}).PrintObj(t, tw); err != nil {
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
