// Package scale is `kubectl litepool scale`; the workflow is pkg/scale.
package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/scale"
)

// ScaleOptions is `scale`.
type ScaleOptions struct {
	kit.Mutation
	Pool       string
	Nodes      int
	NodesSet   bool // --nodes was given (0 is a size)
	Add        []string
	Remove     []string
	DeleteNode bool
	Drain      nodeops.DrainOptions

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdScale is `kubectl litepool scale POOL --nodes N | --add NODE... | --remove NODE...`.
func NewCmdScale(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ScaleOptions{Mutation: kit.NewMutation(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "scale POOL (--nodes N | --add NODE... | --remove NODE...)",
		Short: "Grow or shrink a pool safely",
		Long: templates.LongDesc(`
			Grow or shrink a pool: --nodes N sets its size, --add and --remove name
			the nodes.

			Scale-up takes nodes from the default pool (nodes that belong to no pool)
			whose accelerator model is the pool's (runwhere.ai/gpu-type; rule N2), that
			are Ready, schedulable and healthy, by name. A node of another model, or of
			another pool, is refused. Joining an exclusive pool taints the node.

			Scale-down (risk: high; it asks for "yes", or pass --yes) never goes below
			the pool's minNodes (rule N3) and, with --nodes, takes idle nodes first
			(no workload pods), then the least busy. Each node is cordoned, drained as
			kubectl drain does (PodDisruptionBudgets respected, up to --timeout), then
			leaves the pool and is uncordoned in the default pool (or deleted, with
			--delete-node). If a drain is blocked (a PodDisruptionBudget refuses an
			eviction until --timeout) the scale-down stops, reports the pods that
			could not be evicted, and puts every node it touched back as it was
			(uncordoned unless it was cordoned before); no node leaves the pool.

			On a pool with spec.topology, scale-down keeps super nodes (unit domains)
			whole: with --nodes it takes whole idle domains first, then members outside
			every domain, then members of the least used domain, never leaving a
			domain with fewer than spec.topology.minNodesPerDomain members in service
			unless none stay; --remove is refused when it would. --dry-run also shows
			the plan and the largest free block (most free accelerators in one whole
			domain) before and after.

			Events are recorded on the nodes ("removing node X from pool P", "node X
			removed from pool P", "node X added to pool P"). A scale-down that was
			interrupted leaves its nodes marked (runwhere.ai/scale-down); running the
			command again resumes with them.`),
		Example: templates.Examples(`
			# Grow train-a100 to 4 nodes with A100 nodes from the default pool
			kubectl litepool scale train-a100 --nodes 4

			# Add two named nodes
			kubectl litepool scale train-a100 --add a100-node-4 --add a100-node-5

			# Shrink to 2 nodes, idle nodes first, giving each drain 10 minutes
			kubectl litepool scale train-a100 --nodes 2 --timeout 10m --yes

			# Remove one node and delete its Node object
			kubectl litepool scale train-a100 --remove a100-node-3 --delete-node --yes

			# See what a scale-down would do
			kubectl litepool scale train-a100 --nodes 2 --dry-run=client`),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	cmd.Flags().IntVar(&o.Nodes, "nodes", 0, "The number of nodes the pool should have (0 or more)")
	cmd.Flags().StringSliceVar(&o.Add, "add", nil, "Nodes of the default pool to add (repeatable, or comma-separated)")
	cmd.Flags().StringSliceVar(&o.Remove, "remove", nil, "Member nodes to remove (repeatable, or comma-separated)")
	cmd.Flags().BoolVar(&o.DeleteNode, "delete-node", false, "Delete the Node objects of removed nodes")
	cmd.Flags().DurationVar(&o.Drain.Timeout, "timeout", 5*time.Minute, "How long each node's drain may wait for evictions (PodDisruptionBudgets) before the scale-down stops")
	cmd.Flags().BoolVar(&o.Drain.IgnoreDaemonSets, "ignore-daemonsets", true, "Leave DaemonSet pods on drained nodes")
	cmd.Flags().BoolVar(&o.Drain.DeleteEmptyDirData, "delete-emptydir-data", false, "Drain pods that use emptyDir (their local data is lost)")
	cmd.Flags().BoolVar(&o.Drain.Force, "force", false, "Drain pods no controller manages (they are deleted and not recreated)")
	cmd.Flags().IntVar(&o.Drain.GracePeriodSeconds, "grace-period", -1, "Seconds each evicted pod gets to terminate; negative: the pod's own")
	kit.AddControllerNamespaceFlag(cmd.Flags(), &o.Drain.Namespace)
	o.Mutation.AddFlags(cmd, true)
	_ = cmd.RegisterFlagCompletionFunc("add", kit.CompleteNodeNames(f))
	_ = cmd.RegisterFlagCompletionFunc("remove", kit.CompleteNodeNames(f))
	return kit.Bind(cmd, f, o)
}

// Complete reads the pool and whether --nodes was given, and builds the clients.
func (o *ScaleOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Pool = args[0]
	o.NodesSet = cmd.Flags().Changed("nodes")
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Validate checks that exactly one way of scaling is given, and -o.
func (o *ScaleOptions) Validate() error {
	if err := o.Mutation.Validate(); err != nil {
		return err
	}
	if o.NodesSet && o.Nodes < 0 {
		return fmt.Errorf("invalid --nodes %d: it is the number of nodes the pool should have, 0 or more (a scale-down stops at the pool's minNodes)", o.Nodes)
	}
	given := 0
	for _, b := range []bool{o.NodesSet, len(o.Add) > 0, len(o.Remove) > 0} {
		if b {
			given++
		}
	}
	if given != 1 {
		return errors.New("give exactly one of --nodes N, --add NODE... or --remove NODE...") //nolint:staticcheck // ends with the flags' own NODE...
	}
	if o.Pool == policy.DefaultPool {
		return fmt.Errorf("the default pool cannot be scaled: it is the nodes that belong to no pool; scale the pool you want the nodes in or out of")
	}
	return nil
}

// Run plans the change and carries it out (pkg/scale).
func (o *ScaleOptions) Run(ctx context.Context) error {
	pool, members, err := kit.NewCatalog(ctx, o.clients).Lookup(o.Pool)
	if err != nil {
		return err
	}
	s := o.scaler()
	current := len(members)
	switch {
	case len(o.Add) > 0:
		return s.Up(ctx, pool, current, o.Add, 0)
	case len(o.Remove) > 0:
		return s.Down(ctx, pool, members, o.Remove, 0)
	case o.Nodes > current:
		return s.Up(ctx, pool, current, nil, o.Nodes-current)
	case o.Nodes < current:
		return s.Down(ctx, pool, members, nil, current-o.Nodes)
	}
	return o.Print(o.Out, pool, fmt.Sprintf("already has %d node(s)", current))
}

// scaler is the workflow with this command's flags, printing and confirmation.
func (o *ScaleOptions) scaler() *scale.Scaler {
	d := o.Drain
	d.Out, d.ErrOut = o.Out, o.ErrOut
	if o.Output() != "" { // eviction progress is not the output asked for
		d.Out = o.ErrOut
	}
	return &scale.Scaler{
		Kube: o.clients.Kube, DryRun: o.DryRun, Accelerators: o.clients.Accelerators,
		Drain: d, DeleteNode: o.DeleteNode, Recorder: o.Recorder,
		Printer: kit.Printer{Mutation: &o.Mutation, IOStreams: o.IOStreams},
		Confirm: func(p scale.Plan) error { return o.Confirm(o.IOStreams, o.risk(p), "") },
	}
}

func (o *ScaleOptions) risk(p scale.Plan) kit.Risk {
	var evicted []string
	for _, n := range p.Remove {
		evicted = append(evicted, p.Pods[n]...)
	}
	fate := "leave the pool and return, uncordoned, to the default pool"
	if o.DeleteNode {
		fate = "leave the pool and their Node objects are deleted"
	}
	impact := []string{fmt.Sprintf("node(s) %s are cordoned and drained, then %s", strings.Join(p.Remove, ", "), fate)}
	if len(evicted) > 0 {
		impact = append(impact, fmt.Sprintf("%d workload pod(s) are evicted: %s", len(evicted), kit.Summarize(evicted, 5)))
	} else {
		impact = append(impact, "no workload pods run on them")
	}
	return kit.Risk{
		Level:      "high",
		Operation:  fmt.Sprintf("scale down pool %q from %d to %d node(s)", p.Pool, p.Current, p.Current-len(p.Remove)),
		Impact:     impact,
		Precaution: []string{"let jobs checkpoint first; PodDisruptionBudgets are respected, and a blocked drain puts everything back"},
	}
}
