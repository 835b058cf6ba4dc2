package get

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/queue"
)

// GetDomainsOptions is `get domains`.
type GetDomainsOptions struct {
	Print *kit.PrintOptions
	Pool  string

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdGetDomains is `kubectl litepool get domains [--pool P]`.
func NewCmdGetDomains(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &GetDomainsOptions{Print: kit.NewPrintOptions(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "domains",
		Aliases: []string{"domain"},
		Short:   "List the topology domains (super nodes, racks) of pools with spec.topology",
		Long: templates.LongDesc(`
			List the unit domains of each pool that declares spec.topology
			(docs/topology.md): per domain its nodes (schedulable/total: Ready, not
			cordoned, quarantined, upgrading, or tainted beyond what the pool's pods
			tolerate), its accelerators (free/total on the schedulable nodes) and its
			state: Whole (every member schedulable), Degraded (some), Out (none), and
			Mixed when its members carry more than one accelerator model or count.
			Members without one of the topology's labels are listed as <outside>.

			-o json, yaml, name and jsonpath print a Domain view (kind Domain): it is
			not a resource the API server serves.`),
		Example: templates.Examples(`
			# Every pool's domains
			kubectl litepool get domains

			# One pool's, with the members of each domain
			kubectl litepool get domains --pool train-a3 -o wide`),
	}
	kit.Bind(cmd, f, o)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Pool, "pool", "", "Only the domains of this pool")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return cmd
}

// Complete builds the clients.
func (o *GetDomainsOptions) Complete(f kit.Factory, _ *cobra.Command, _ []string) (err error) {
	o.clients, err = f.Clients()
	return err
}

// Validate checks -o.
func (o *GetDomainsOptions) Validate() error { return o.Print.Validate() }

// Run lists and prints: one pass over nodes and pods, as get pools.
func (o *GetDomainsOptions) Run(ctx context.Context) error {
	objects, err := o.clients.Pools.List(ctx)
	if err != nil {
		return fmt.Errorf("listing Pool objects: %w", err)
	}
	if o.Pool != "" {
		objects = filterPools(objects, o.Pool)
		if len(objects) == 0 {
			return kit.PoolNotFound(o.Pool)
		}
		if !policy.HasTopology(&objects[0]) {
			return fmt.Errorf("pool %q has no spec.topology: its nodes form no domains (docs/topology.md)", o.Pool)
		}
	}
	topologies := inventory.TopologiesOf(objects)
	if len(topologies) == 0 {
		fmt.Fprintln(o.ErrOut, "No resources found: no pool declares spec.topology")
		return nil
	}
	inv, err := inventory.Collect(ctx, o.clients.Kube, inventory.Options{NodeSelector: kit.PoolSelector(o.Pool), WithoutLabels: true,
		Accelerators: o.clients.Accelerators, Topologies: topologies})
	if err != nil {
		return err
	}
	kit.PrintWarnings(o.ErrOut, inv)
	rows := domainRows(inv)
	if err := o.addHyperNodes(ctx, objects, rows); err != nil {
		return err
	}
	if o.Print.IsTable() {
		return kit.PrintTable(o.Print, o.Out, DomainTable(rows))
	}
	views := make([]unstructured.Unstructured, len(rows))
	for i := range rows {
		views[i] = domainView(&rows[i])
	}
	return kit.Print(o.Print, o.Out, views, false, nil)
}

// domainRow is one domain of one pool, or its members outside every domain.
type domainRow struct {
	pool, unit string
	domain     policy.Domain
	outside    bool
	// volcano: the pool feeds Volcano; hyperNode is its HyperNode for the domain.
	volcano   bool
	hyperNode string
}

// addHyperNodes fills in the HyperNode of each domain of a pool feeding Volcano: the
// pool's own HyperNodes (controller ownerReference to the Pool) of the unit level.
func (o *GetDomainsOptions) addHyperNodes(ctx context.Context, pools []v1alpha1.Pool, rows []domainRow) error {
	byName := map[string]*v1alpha1.Pool{}
	for i := range pools {
		if q := pools[i].Spec.Queue; q != nil && q.Scheduler == v1alpha1.QueueVolcano {
			byName[pools[i].Name] = &pools[i]
		}
	}
	if len(byName) == 0 || o.clients.Dynamic == nil {
		return nil
	}
	gvr := queue.VolcanoHyperNode.GroupVersion().WithResource("hypernodes")
	list, err := o.clients.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("listing Volcano HyperNodes: %w", err)
	}
	names := map[[3]string]string{} // pool, level, domain
	if list != nil {
		for i := range list.Items {
			h := &list.Items[i]
			p := byName[h.GetLabels()[policy.LabelPool]]
			if p == nil || !queue.OwnedBy(h, p) {
				continue
			}
			a := h.GetAnnotations()
			names[[3]string{p.Name, a[policy.AnnotationHyperNodeLevel], a[policy.AnnotationHyperNodeDomain]}] = h.GetName()
		}
	}
	for i := range rows {
		r := &rows[i]
		if byName[r.pool] == nil {
			continue
		}
		r.volcano = true
		if !r.outside {
			r.hyperNode = names[[3]string{r.pool, r.unit, r.domain.Name}]
		}
	}
	return nil
}

// domainRows are the rows of every pool with domains, by pool name, each pool's
// domains by name and its outside members last.
func domainRows(inv *inventory.Inventory) []domainRow {
	var rows []domainRow
	for _, name := range inv.PoolNames() {
		p := inv.Pools[name]
		if p.Domains == nil {
			continue
		}
		for _, d := range p.Domains.Domains {
			rows = append(rows, domainRow{pool: name, unit: p.Topology.Unit, domain: d})
		}
		if len(p.Domains.Outside) > 0 {
			rows = append(rows, domainRow{pool: name, unit: p.Topology.Unit, domain: p.Domains.OutsideFigures, outside: true})
		}
	}
	return rows
}

// outsideName names the row of a pool's members outside every domain.
const outsideName = "<outside>"

func (r *domainRow) name() string {
	if r.outside {
		return outsideName
	}
	return r.domain.Name
}

func (r *domainRow) state() string {
	if r.outside {
		return "Outside"
	}
	if r.domain.Mixed {
		return r.domain.State + ",Mixed"
	}
	return r.domain.State
}

// notSchedulable are a domain's members NodeOut leaves out.
func (r *domainRow) notSchedulable() []string {
	var out []string
	for _, m := range r.domain.Members {
		if !slices.Contains(r.domain.Schedulable, m) {
			out = append(out, m)
		}
	}
	return out
}

// DomainTable is the table of `get domains`; -o wide adds the unit level, the members
// and those held out.
func DomainTable(rows []domainRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		kit.Column("Pool", "string", false),
		kit.Column("Domain", "string", false),
		kit.Column("Nodes", "string", false),
		kit.Column("Accelerators", "string", false),
		kit.Column("State", "string", false),
		kit.Column("Unit", "string", true),
		kit.Column("Members", "string", true),
		kit.Column("Held Out", "string", true),
	}}
	volcano := slices.ContainsFunc(rows, func(r domainRow) bool { return r.volcano })
	if volcano {
		t.ColumnDefinitions = append(t.ColumnDefinitions, kit.Column("HyperNode", "string", false))
	}
	for i := range rows {
		r := &rows[i]
		d := &r.domain
		cells := []any{r.pool, r.name(),
			fmt.Sprintf("%d/%d", len(d.Schedulable), len(d.Members)), fmt.Sprintf("%d/%d", d.Free, d.Total), r.state(),
			r.unit, kit.JoinOrNone(d.Members), kit.JoinOrNone(r.notSchedulable())}
		if volcano {
			cells = append(cells, kit.None(r.hyperNode))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells})
	}
	return t
}

// domainView is the Domain view printed by -o json|yaml|name|jsonpath.
func domainView(r *domainRow) unstructured.Unstructured {
	d := &r.domain
	strs := func(s []string) []any {
		out := make([]any, len(s))
		for i, v := range s {
			out[i] = v
		}
		return out
	}
	spec := map[string]any{"pool": r.pool, "unit": r.unit, "domain": r.name(), "members": strs(d.Members)}
	if r.hyperNode != "" {
		spec["hyperNode"] = r.hyperNode
	}
	// A domain's key may hold "/" (its path down the levels): the view's name is
	// pool.key with "/" as ".", the key itself is in spec.
	return unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "Domain",
		"metadata":   map[string]any{"name": r.pool + "." + strings.ReplaceAll(r.name(), "/", "."), "labels": map[string]any{policy.LabelPool: r.pool}},
		"spec":       spec,
		"status": map[string]any{"state": r.state(), "nodes": int64(len(d.Members)), "schedulableNodes": int64(len(d.Schedulable)),
			"schedulable": strs(d.Schedulable), "acceleratorTotal": d.Total, "acceleratorFree": d.Free, "mixed": d.Mixed},
	}}
}
