package get

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// GetLabelsOptions is `get labels`.
type GetLabelsOptions struct {
	Print *kit.PrintOptions
	Nodes []string
	Key   string
	All   bool

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdGetLabels is `kubectl litepool get labels NODE... [--key KEY] [--all]`.
func NewCmdGetLabels(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &GetLabelsOptions{Print: &kit.PrintOptions{}, IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "labels NODE...",
		Short: "Show the litepool labels of nodes",
		Long: templates.LongDesc(`
			Show the labels litepool manages (runwhere.ai/...) on nodes, one row per
			label; --all shows every label. --key shows one label, written in full
			(runwhere.ai/pool); a node without it is an error.`),
		Example: templates.Examples(`
			# The litepool labels of a node
			kubectl litepool get labels gpu-node-6

			# The pool label only (gpuctl's "get labels NODE --key=runwhere.ai/pool")
			kubectl litepool get labels gpu-node-6 --key=runwhere.ai/pool`),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: kit.CompleteNodeNames(f),
	}
	kit.Bind(cmd, f, o)
	cmd.Flags().StringVar(&o.Key, "key", "", "Show only this label (a full runwhere.ai/ key)")
	cmd.Flags().BoolVar(&o.All, "all", false, "Show every label, not only litepool's")
	cmd.Flags().BoolVar(&o.Print.NoHeaders, "no-headers", false, "Don't print headers")
	return cmd
}

// Complete reads the node names and --key (checked and written in full) and builds
// the clients.
func (o *GetLabelsOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	o.Nodes = args
	if o.Key != "" {
		if o.Key, err = policy.UserLabelKey(o.Key); err != nil {
			return err
		}
	}
	o.clients, err = f.Clients()
	return err
}

// Validate has nothing to check that Complete did not.
func (o *GetLabelsOptions) Validate() error { return nil }

// LabelRow is one label of one node.
type LabelRow struct{ Node, Key, Value string }

// Run reads the nodes and prints their labels.
func (o *GetLabelsOptions) Run(ctx context.Context) error {
	var rows []LabelRow
	for _, name := range o.Nodes {
		node, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		r, err := o.rows(node)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(o.ErrOut, "No litepool labels found (--all shows every label)")
		return nil
	}
	return kit.PrintTable(o.Print, o.Out, LabelTable(rows))
}

func (o *GetLabelsOptions) rows(node *corev1.Node) ([]LabelRow, error) {
	if o.Key != "" {
		v, ok := node.Labels[o.Key]
		if !ok {
			return nil, fmt.Errorf("node %q has no label %q", node.Name, o.Key)
		}
		return []LabelRow{{node.Name, o.Key, v}}, nil
	}
	var rows []LabelRow
	for _, k := range kit.SortedKeys(node.Labels) {
		if o.All || strings.HasPrefix(k, policy.Prefix) {
			rows = append(rows, LabelRow{node.Name, k, node.Labels[k]})
		}
	}
	return rows, nil
}

// LabelTable is the table of `get labels`.
func LabelTable(rows []LabelRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		kit.Column("Node", "string", false),
		kit.Column("Key", "string", false),
		kit.Column("Value", "string", false),
	}}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{r.Node, r.Key, r.Value}})
	}
	return t
}
