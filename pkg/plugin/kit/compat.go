package kit

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/runwhere-ai/litepool/pkg/compat"
)

// CompatSourceFlags select the matrix: embedded, a file or a ConfigMap.
type CompatSourceFlags struct{ compat.Source }

// AddFlags adds --compat-file and --compat-configmap.
func (c *CompatSourceFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.File, "compat-file", "", "Read the compatibility matrix from this YAML file instead of the embedded one")
	cmd.Flags().StringVar(&c.ConfigMap, "compat-configmap", "", "Read the compatibility matrix from this ConfigMap (NAMESPACE/NAME, key "+compat.ConfigMapKey+") instead of the embedded one")
}

// CompatCheck is one checked chain and what it was checked for.
type CompatCheck struct {
	Subject string        `json:"subject"`
	Nodes   []string      `json:"nodes,omitempty"`
	Result  compat.Result `json:"result"`
}

// PrintCompatChecks prints each check as a head line, a table of its links (with their
// source when wide) and a verdict line.
func PrintCompatChecks(out io.Writer, checks []CompatCheck, wide bool, source string) error {
	for i, c := range checks {
		if i > 0 {
			fmt.Fprintln(out)
		}
		head := c.Subject
		if len(c.Nodes) > 0 {
			head += " (nodes " + strings.Join(c.Nodes, ", ") + ")"
		}
		vendor := c.Result.Vendor
		if vendor == "" {
			vendor = "unknown vendor"
		}
		fmt.Fprintf(out, "%s: %s, matrix %s\n", head, vendor, source)
		w := printers.GetNewTabWriter(out)
		if wide {
			fmt.Fprintln(w, "LINK\tVERSION\tVERDICT\tREASON\tSOURCE")
		} else {
			fmt.Fprintln(w, "LINK\tVERSION\tVERDICT\tREASON")
		}
		for _, l := range c.Result.Links {
			v := l.Value
			if v == "" {
				v = "-"
			}
			if wide {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", l.Link, v, l.Verdict, l.Reason, None(l.Source))
			} else {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", l.Link, v, l.Verdict, l.Reason)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(out, "verdict: %s\n", c.Result.Verdict)
	}
	return nil
}
