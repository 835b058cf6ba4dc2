package get

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// GetNodesOptions is `get nodes`.
type GetNodesOptions struct {
	Print  *kit.PrintOptions
	Pool   string
	SortBy string
	Names  []string

	clients *kit.Clients
	genericiooptions.IOStreams
}

var nodeSortKeys = []string{"name", "pool", "status", "gpu-total", "gpu-used", "gpu-free"}

// NewCmdGetNodes is `kubectl litepool get nodes [NAME...] [--pool P]`.
func NewCmdGetNodes(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &GetNodesOptions{Print: kit.NewPrintOptions(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "nodes [NAME...]",
		Aliases: []string{"node", "no"},
		Short:   "List nodes with their pool, status and accelerator use",
		Long: templates.LongDesc(`
			List nodes with the pool and node pool they belong to, their status and
			their accelerators. The status is litepool's model: Running, NotReady,
			Cordoned, Draining (a litepool drain is evicting its pods), Upgrading (a
			driver upgrade is under way) or Degraded (it failed a stress test).

			With -o json, yaml, name or jsonpath the Node objects themselves are printed.`),
		Example: templates.Examples(`
			# Every node
			kubectl litepool get nodes

			# The nodes of one pool, with driver versions and workload pod counts
			kubectl litepool get nodes --pool train-a100 -o wide

			# The nodes that belong to no pool
			kubectl litepool get nodes --pool default

			# Nodes with the most free accelerators first
			kubectl litepool get nodes --sort-by=gpu-free`),
		ValidArgsFunction: kit.CompleteNodeNames(f),
	}
	kit.Bind(cmd, f, o)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Pool, "pool", "", "Only nodes of this pool (\"default\": nodes of no pool)")
	cmd.Flags().StringVar(&o.SortBy, "sort-by", "name", fmt.Sprintf("Sort by one of: %v (figures largest first)", nodeSortKeys))
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return cmd
}

// Complete reads the node names and builds the clients.
func (o *GetNodesOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	o.Names = args
	o.clients, err = f.Clients()
	return err
}

// Validate checks the flags.
func (o *GetNodesOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	return checkSortKey(o.SortBy, nodeSortKeys)
}

// Run lists and prints.
func (o *GetNodesOptions) Run(ctx context.Context) error {
	if !o.Print.IsTable() {
		return o.printObjects(ctx)
	}
	inv, err := inventory.Collect(ctx, o.clients.Kube, inventory.Options{NodeSelector: kit.PoolSelector(o.Pool), WithoutLabels: true, Accelerators: o.clients.Accelerators})
	if err != nil {
		return err
	}
	kit.PrintWarnings(o.ErrOut, inv)
	if err := o.checkPool(ctx, len(inv.Nodes)); err != nil {
		return err
	}
	nodes, err := selectNodes(inv.Nodes, o.Names)
	if err != nil {
		return err
	}
	sortNodes(nodes, o.SortBy)
	if len(nodes) == 0 {
		fmt.Fprintln(o.ErrOut, "No resources found")
		return nil
	}
	t := NodeTable(nodes)
	o.addHealthColumn(ctx, t)
	return kit.PrintTable(o.Print, o.Out, t)
}

// checkPool makes --pool of a pool that does not exist an error rather than an empty
// list.
func (o *GetNodesOptions) checkPool(ctx context.Context, members int) error {
	if o.Pool == "" || o.Pool == policy.DefaultPool || members > 0 {
		return nil
	}
	_, err := o.clients.Pools.Get(ctx, o.Pool)
	return err
}

// printObjects prints the Node objects for -o json|yaml|name|jsonpath.
func (o *GetNodesOptions) printObjects(ctx context.Context) error {
	list, err := o.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kit.PoolSelector(o.Pool)})
	if err != nil {
		return err
	}
	if err := o.checkPool(ctx, len(list.Items)); err != nil {
		return err
	}
	items := list.Items
	if len(o.Names) > 0 {
		byName := map[string]corev1.Node{}
		for _, n := range items {
			byName[n.Name] = n
		}
		items = nil
		for _, name := range o.Names {
			n, ok := byName[name]
			if !ok {
				return nodeNotFound(name, o.Pool)
			}
			items = append(items, n)
		}
	}
	for i := range items {
		items[i].APIVersion, items[i].Kind = "v1", "Node"
	}
	return kit.Print(o.Print, o.Out, items, len(o.Names) == 1, nil)
}

func nodeNotFound(name, pool string) error {
	if pool != "" {
		return fmt.Errorf("node %q not found in pool %q", name, pool)
	}
	return apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

func selectNodes(nodes []*inventory.Node, names []string) ([]inventory.Node, error) {
	out := make([]inventory.Node, 0, len(nodes))
	if len(names) == 0 {
		for _, n := range nodes {
			out = append(out, *n)
		}
		return out, nil
	}
	byName := map[string]*inventory.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, name := range names {
		n, ok := byName[name]
		if !ok {
			return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
		}
		out = append(out, *n)
	}
	return out, nil
}

// sortNodes orders by name, by pool then name, by status then name, or by a figure,
// largest first.
func sortNodes(nodes []inventory.Node, key string) {
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := &nodes[i], &nodes[j]
		switch key {
		case "pool":
			if a.Pool != b.Pool {
				return a.Pool < b.Pool
			}
		case "status":
			if a.State != b.State {
				return a.State < b.State
			}
		case "gpu-total", "gpu-used", "gpu-free":
			fa, fb := nodeFigure(a, key), nodeFigure(b, key)
			if fa != fb {
				return fa > fb
			}
		}
		return a.Name < b.Name
	})
}

func nodeFigure(n *inventory.Node, key string) int64 {
	switch key {
	case "gpu-total":
		return n.Total
	case "gpu-used":
		return n.Used
	}
	return n.Free()
}

// NodeTable is the table of `get nodes`; -o wide adds the accelerator resource, the
// driver version and the number of workload pods.
func NodeTable(nodes []inventory.Node) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		kit.Column("Name", "string", false),
		kit.Column("Pool", "string", false),
		kit.Column("Node Pool", "string", false),
		kit.Column("Status", "string", false),
		kit.Column("GPU Type", "string", false),
		kit.Column("GPU Total", "integer", false),
		kit.Column("GPU Used", "integer", false),
		kit.Column("GPU Free", "integer", false),
		kit.Column("Resource", "string", true),
		kit.Column("Driver Version", "string", true),
		kit.Column("Workload Pods", "integer", true),
	}}
	withMIG := slices.ContainsFunc(nodes, func(n inventory.Node) bool { return len(n.MIG) > 0 })
	if withMIG {
		t.ColumnDefinitions = append(t.ColumnDefinitions, kit.Column(migColumn, "string", true))
	}
	for i := range nodes {
		n := &nodes[i]
		cells := []any{n.Name, n.Pool, kit.None(n.NodePool), string(n.State), kit.None(n.GPUType), n.Total, n.Used, n.Free(),
			kit.None(string(n.Resource)), kit.None(n.DriverVersion), int64(n.WorkloadPods)}
		if withMIG {
			cells = append(cells, nodeMIGCell(n.MIG))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells})
	}
	withDRANodes(t, nodes)
	return t
}
