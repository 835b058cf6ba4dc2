package kit

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// DataOutput is -o for commands whose output is data, not Kubernetes objects (check
// compat, upgrade status, stress run, version): json and yaml of the data as it is, and
// jsonpath and go-template through kubectl's printers over the same JSON, so that
// `-o jsonpath='{...}'` works as it does with kubectl. Extra names the command's own
// formats besides the default (for example "wide").
type DataOutput struct {
	Format string
	Extra  []string

	printFlags *genericclioptions.PrintFlags
}

// NewDataOutput returns -o with the command's own formats.
func NewDataOutput(extra ...string) *DataOutput {
	return &DataOutput{Extra: extra, printFlags: genericclioptions.NewPrintFlags("")}
}

// AddFlags adds -o and --template.
func (o *DataOutput) AddFlags(cmd *cobra.Command) {
	o.printFlags.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(&o.Format, "output", "o", "", "Output format: "+strings.Join(o.AllowedFormats(), ", "))
}

// AllowedFormats lists what -o takes.
func (o *DataOutput) AllowedFormats() []string {
	return append(append([]string{}, o.Extra...), "json", "yaml", "jsonpath", "jsonpath-as-json", "jsonpath-file", "go-template", "go-template-file", "template", "templatefile")
}

// Data says whether -o asks for data (json, yaml, a template), not the command's own
// text or table.
func (o *DataOutput) Data() bool {
	if o.Format == "" {
		return false
	}
	for _, e := range o.Extra {
		if o.Format == e {
			return false
		}
	}
	return true
}

// Validate checks -o (and that a template came with jsonpath or go-template).
func (o *DataOutput) Validate() error {
	if !o.Data() {
		return nil
	}
	switch o.Format {
	case "json", "yaml":
		return nil
	case "name": // kubectl's printers take it, but data has no kind/name to print
		return fmt.Errorf("invalid -o %q: this command prints data, not objects: use one of %s", o.Format, strings.Join(o.AllowedFormats(), ", "))
	}
	if _, err := o.toPrinter(); err != nil {
		return fmt.Errorf("invalid -o %q: must be one of %s: %w", o.Format, strings.Join(o.AllowedFormats(), ", "), err)
	}
	return nil
}

func (o *DataOutput) toPrinter() (printers.ResourcePrinter, error) {
	o.printFlags.OutputFormat = &o.Format
	return o.printFlags.ToPrinter()
}

// Print writes data in the -o format.
func (o *DataOutput) Print(out io.Writer, data any) error {
	switch o.Format {
	case "json":
		b, err := json.MarshalIndent(data, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(data)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var content any
	if err := json.Unmarshal(b, &content); err != nil {
		return err
	}
	p, err := o.toPrinter()
	if err != nil {
		return err
	}
	// A list prints as {"items": [...]}, as kubectl's lists do, so that
	// jsonpath='{.items[*].x}' reads it.
	obj, ok := content.(map[string]any)
	if !ok {
		obj = map[string]any{"items": content}
	}
	return p.PrintObj(&unstructured.Unstructured{Object: obj}, out)
}
