package get

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// GetNodePoolsOptions is `get nodepools`.
type GetNodePoolsOptions struct {
	Print *kit.PrintOptions
	Pool  string
	Names []string

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdGetNodePools is `kubectl litepool get nodepools [NAME...] [--pool P]`.
func NewCmdGetNodePools(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &GetNodePoolsOptions{Print: kit.NewPrintOptions(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "nodepools [NAME...]",
		Aliases: []string{"nodepool", "np"},
		Short:   "List node pools: groups of same-spec nodes inside pools",
		Long: templates.LongDesc(`
			List node pools with their pool, member count, status and accelerators. A
			node pool is declared in its pool's spec.nodePools (with labels and taints
			for its members) and nodes join it with the label runwhere.ai/node-pool. A
			node-pool label that no pool declares is listed as "<labels only>".

			-o json, yaml, name and jsonpath print a NodePool view (kind NodePool): it is
			not a resource the API server serves.`),
		Example: templates.Examples(`
			# Every node pool
			kubectl litepool get nodepools

			# The node pools of one pool, with their labels and taints
			kubectl litepool get nodepools --pool train-a100 -o wide`),
	}
	kit.Bind(cmd, f, o)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Pool, "pool", "", "Only node pools of this pool")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return cmd
}

// Complete reads the node pool names and builds the clients.
func (o *GetNodePoolsOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	o.Names = args
	o.clients, err = f.Clients()
	return err
}

// Validate checks -o.
func (o *GetNodePoolsOptions) Validate() error { return o.Print.Validate() }

// Run lists and prints.
func (o *GetNodePoolsOptions) Run(ctx context.Context) error {
	objects, err := o.clients.Pools.List(ctx)
	if err != nil {
		return fmt.Errorf("listing Pool objects: %w", err)
	}
	inv, err := inventory.Collect(ctx, o.clients.Kube, inventory.Options{NodeSelector: kit.PoolSelector(o.Pool), WithoutLabels: true, Accelerators: o.clients.Accelerators})
	if err != nil {
		return err
	}
	if o.Pool != "" {
		objects = filterPools(objects, o.Pool)
		if len(objects) == 0 && len(inv.Nodes) == 0 && o.Pool != policy.DefaultPool {
			return kit.PoolNotFound(o.Pool)
		}
	}
	rows := kit.NodePoolRows(objects, inv.Nodes)
	if len(o.Names) > 0 {
		rows, err = selectNodePools(rows, o.Names)
		if err != nil {
			return err
		}
	}
	if len(rows) == 0 {
		fmt.Fprintln(o.ErrOut, "No resources found")
		return nil
	}
	if o.Print.IsTable() {
		return kit.PrintTable(o.Print, o.Out, NodePoolTable(rows))
	}
	views := make([]unstructured.Unstructured, len(rows))
	for i := range rows {
		views[i] = nodePoolView(&rows[i])
	}
	return kit.Print(o.Print, o.Out, views, len(o.Names) == 1, nil)
}

func filterPools(pools []v1alpha1.Pool, name string) []v1alpha1.Pool {
	for _, p := range pools {
		if p.Name == name {
			return []v1alpha1.Pool{p}
		}
	}
	return nil
}

func selectNodePools(rows []kit.NodePoolRow, names []string) ([]kit.NodePoolRow, error) {
	var out []kit.NodePoolRow
	for _, name := range names {
		found := false
		for _, r := range rows {
			if r.Name == name {
				out = append(out, r)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("node pool %q not found", name)
		}
	}
	return out, nil
}

// NodePoolTable is the table of `get nodepools`; -o wide adds labels and taints.
func NodePoolTable(rows []kit.NodePoolRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		kit.Column("Pool", "string", false),
		kit.Column("Node Pool", "string", false),
		kit.Column("Status", "string", false),
		kit.Column("Nodes", "integer", false),
		kit.Column("GPU Total", "integer", false),
		kit.Column("GPU Used", "integer", false),
		kit.Column("GPU Free", "integer", false),
		kit.Column("Labels", "string", true),
		kit.Column("Taints", "string", true),
	}}
	for i := range rows {
		r := &rows[i]
		phase, total, used := r.Figures()
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{r.Pool, r.Name, phase, int64(len(r.Nodes)), total, used, max(total-used, 0), r.LabelsCell(), r.TaintsCell()},
		})
	}
	return t
}

// nodePoolView is the NodePool view printed by -o json|yaml|name|jsonpath.
func nodePoolView(r *kit.NodePoolRow) unstructured.Unstructured {
	phase, total, used := r.Figures()
	nodes := make([]any, len(r.Nodes))
	for i, n := range r.Nodes {
		nodes[i] = n.Name
	}
	spec := map[string]any{"pool": r.Pool, "defined": r.Defined}
	if len(r.Labels) > 0 {
		labels := map[string]any{}
		for k, v := range r.Labels {
			labels[k] = v
		}
		spec["labels"] = labels
	}
	if len(r.Taints) > 0 {
		taints := make([]any, len(r.Taints))
		for i := range r.Taints {
			t, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&r.Taints[i])
			taints[i] = t
		}
		spec["taints"] = taints
	}
	return unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": r.Name, "labels": map[string]any{policy.LabelPool: r.Pool}},
		"spec":       spec,
		"status": map[string]any{"phase": phase, "nodeCount": int64(len(r.Nodes)), "nodes": nodes,
			"acceleratorTotal": total, "acceleratorUsed": used, "acceleratorFree": max(total-used, 0)},
	}}
}
