package get

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
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
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Names = args
			return kit.Run(f, cmd, &o.clients, o)
		},
	}
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Pool, "pool", "", "Only node pools of this pool")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return cmd
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
	rows := NodePoolRows(objects, inv.Nodes)
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
		views[i] = rows[i].view()
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

func selectNodePools(rows []NodePoolRow, names []string) ([]NodePoolRow, error) {
	var out []NodePoolRow
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

// NodePoolRow is one node pool: declared in a pool's spec, or seen only as node labels.
type NodePoolRow struct {
	Pool    string
	Name    string
	Defined bool
	Labels  map[string]string
	Taints  []corev1.Taint
	Nodes   []*inventory.Node
}

// NodePoolRows gathers node pools from Pool specs and node labels, by pool then name.
func NodePoolRows(pools []v1alpha1.Pool, nodes []*inventory.Node) []NodePoolRow {
	type key struct{ pool, name string }
	rows := map[key]*NodePoolRow{}
	for _, p := range pools {
		for _, np := range p.Spec.NodePools {
			rows[key{p.Name, np.Name}] = &NodePoolRow{Pool: p.Name, Name: np.Name, Defined: true, Labels: np.Labels, Taints: np.Taints}
		}
	}
	for _, n := range nodes {
		if n.NodePool == "" {
			continue
		}
		k := key{n.Pool, n.NodePool}
		r := rows[k]
		if r == nil {
			r = &NodePoolRow{Pool: n.Pool, Name: n.NodePool}
			rows[k] = r
		}
		r.Nodes = append(r.Nodes, n)
	}
	out := make([]NodePoolRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pool != out[j].Pool {
			return out[i].Pool < out[j].Pool
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (r *NodePoolRow) figures() (phase string, total, used int64) {
	states := make([]policy.NodeState, len(r.Nodes))
	for i, n := range r.Nodes {
		states[i] = n.State
		if n.Ready { // as for pools: used and free count the nodes the total counts
			total += n.Total
			used += n.Used
		}
	}
	return policy.PoolPhase(states), total, used
}

func (r *NodePoolRow) LabelsCell() string {
	if !r.Defined {
		return "<labels only>"
	}
	keys := kit.SortedKeys(r.Labels)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + r.Labels[k]
	}
	return kit.None(strings.Join(parts, ","))
}

func (r *NodePoolRow) TaintsCell() string {
	if !r.Defined {
		return "<labels only>"
	}
	return kit.JoinOrNone(TaintStrings(r.Taints))
}

// NodePoolTable is the table of `get nodepools`; -o wide adds labels and taints.
func NodePoolTable(rows []NodePoolRow) *metav1.Table {
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
		phase, total, used := r.figures()
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{r.Pool, r.Name, phase, int64(len(r.Nodes)), total, used, max(total-used, 0), r.LabelsCell(), r.TaintsCell()},
		})
	}
	return t
}

// view is the NodePool view printed by -o json|yaml|name|jsonpath.
func (r *NodePoolRow) view() unstructured.Unstructured {
	phase, total, used := r.figures()
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

// TaintStrings writes taints as kubectl does: key=value:Effect.
func TaintStrings(taints []corev1.Taint) []string {
	out := make([]string, len(taints))
	for i, t := range taints {
		out[i] = t.ToString()
	}
	return out
}
