package kit

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// PrintOptions is -o and --no-headers for the get commands: tables (and
// -o wide) through cli-runtime's table printer from a metav1.Table built per noun;
// json, yaml, name, jsonpath and go-template through cli-runtime's PrintFlags.
type PrintOptions struct {
	Flags     *genericclioptions.PrintFlags
	NoHeaders bool
}

// NewPrintOptions returns print options for a get command.
func NewPrintOptions() *PrintOptions {
	return &PrintOptions{Flags: genericclioptions.NewPrintFlags("").WithTypeSetter(Scheme)}
}

// AddFlags adds -o and --no-headers.
func (o *PrintOptions) AddFlags(cmd *cobra.Command) {
	o.Flags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "Output format: wide, " + strings.Join(o.Flags.AllowedFormats(), ", ")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Don't print headers in table output")
}

func (o *PrintOptions) format() string {
	if o.Flags == nil || o.Flags.OutputFormat == nil {
		return ""
	}
	return *o.Flags.OutputFormat
}

// IsTable says whether the output is a table (default or wide).
func (o *PrintOptions) IsTable() bool { return o.format() == "" || o.format() == "wide" }

// Validate checks -o.
func (o *PrintOptions) Validate() error {
	if o.IsTable() {
		return nil
	}
	_, err := o.Flags.ToPrinter()
	return err
}

// Print writes items. single prints one object rather than a list (as kubectl does when
// one name is asked for). toTable builds the table for table output.
func Print[T any, P interface {
	*T
	runtime.Object
}](o *PrintOptions, out io.Writer, items []T, single bool, toTable func([]T) *metav1.Table) error {
	if o.IsTable() {
		return PrintTable(o, out, toTable(items))
	}
	p, err := o.Flags.ToPrinter()
	if err != nil {
		return err
	}
	if single && len(items) == 1 {
		return p.PrintObj(P(&items[0]), out)
	}
	if o.format() == "name" {
		for i := range items {
			if err := p.PrintObj(P(&items[i]), out); err != nil {
				return err
			}
		}
		return nil
	}
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for i := range items {
		list.Items = append(list.Items, runtime.RawExtension{Object: P(&items[i])})
	}
	return p.PrintObj(list, out)
}

// PrintTable prints a table (nothing when it has no rows) honouring -o wide and
// --no-headers.
func PrintTable(o *PrintOptions, out io.Writer, table *metav1.Table) error {
	if len(table.Rows) == 0 {
		return nil
	}
	p := printers.NewTablePrinter(printers.PrintOptions{Wide: o.format() == "wide", NoHeaders: o.NoHeaders})
	return p.PrintObj(table, out)
}

// Column is shorthand for a table column definition; wide columns have priority 1.
func Column(name, typ string, wide bool) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: typ}
	if wide {
		c.Priority = 1
	}
	return c
}

// None prints an empty value as kubectl does.
func None(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func JoinOrNone(items []string) string { return None(strings.Join(items, ",")) }
