package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var _ = register(NewCmdScale)

// ScaleOptions is `scale`.
type ScaleOptions struct {
	kit.Mutation
	Pool       string
	Nodes      int
	Add        []string
	Remove     []string
	DeleteNode bool
	Drain      nodeops.DrainOptions

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdScale is `kubectl litepool scale POOL --nodes N | --add NODE... | --remove NODE...`.
func NewCmdScale(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ScaleOptions{IOStreams: streams, Nodes: -1}
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
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Pool = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			c, err := f.Clients()
			if err != nil {
				return err
			}
			o.clients = c
			if err := o.Mutation.Complete(cmd, c); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().IntVar(&o.Nodes, "nodes", -1, "The number of nodes the pool should have")
	cmd.Flags().StringSliceVar(&o.Add, "add", nil, "Nodes of the default pool to add (repeatable, or comma-separated)")
	cmd.Flags().StringSliceVar(&o.Remove, "remove", nil, "Member nodes to remove (repeatable, or comma-separated)")
	cmd.Flags().BoolVar(&o.DeleteNode, "delete-node", false, "Delete the Node objects of removed nodes")
	cmd.Flags().DurationVar(&o.Drain.Timeout, "timeout", 5*time.Minute, "How long each node's drain may wait for evictions (PodDisruptionBudgets) before the scale-down stops")
	cmd.Flags().BoolVar(&o.Drain.IgnoreDaemonSets, "ignore-daemonsets", true, "Leave DaemonSet pods on drained nodes")
	cmd.Flags().BoolVar(&o.Drain.DeleteEmptyDirData, "delete-emptydir-data", false, "Drain pods that use emptyDir (their local data is lost)")
	cmd.Flags().BoolVar(&o.Drain.Force, "force", false, "Drain pods no controller manages (they are deleted and not recreated)")
	cmd.Flags().IntVar(&o.Drain.GracePeriodSeconds, "grace-period", -1, "Seconds each evicted pod gets to terminate; negative: the pod's own")
	o.Mutation.AddYesFlag(cmd)
	cmdutil.AddDryRunFlag(cmd)
	_ = cmd.RegisterFlagCompletionFunc("add", kit.CompleteNodeNames(f))
	_ = cmd.RegisterFlagCompletionFunc("remove", kit.CompleteNodeNames(f))
	return cmd
}

// Validate checks that exactly one way of scaling is given.
func (o *ScaleOptions) Validate() error {
	given := 0
	for _, b := range []bool{o.Nodes >= 0, len(o.Add) > 0, len(o.Remove) > 0} {
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

// Run plans the change and carries it out.
func (o *ScaleOptions) Run(ctx context.Context) error {
	pool, members, err := o.load(ctx)
	if err != nil {
		return err
	}
	current := len(members)
	switch {
	case len(o.Add) > 0:
		return o.scaleUp(ctx, pool, current, o.Add, 0)
	case len(o.Remove) > 0:
		return o.scaleDown(ctx, pool, members, o.Remove, 0)
	case o.Nodes > current:
		return o.scaleUp(ctx, pool, current, nil, o.Nodes-current)
	case o.Nodes < current:
		return o.scaleDown(ctx, pool, members, nil, current-o.Nodes)
	}
	fmt.Fprintf(o.Out, "pool.runwhere.ai/%s already has %d node(s)%s\n", o.Pool, current, o.Suffix())
	return nil
}

// load reads the pool and its members. A pool that exists only as labels gets a
// synthesized object whose accelerator is its members' model (minNodes 1).
func (o *ScaleOptions) load(ctx context.Context) (*v1alpha1.Pool, []corev1.Node, error) {
	pool, err := kit.NewCatalog(ctx, o.clients).Object(o.Pool)
	if err != nil {
		return nil, nil, err
	}
	list, err := o.clients.Kube.CoreV1().Nodes().List(ctx, kit.ListBySelector(kit.PoolSelector(o.Pool)))
	if err != nil {
		return nil, nil, err
	}
	if pool == nil {
		if len(list.Items) == 0 {
			return nil, nil, kit.PoolNotFound(o.Pool)
		}
		pool = kit.SynthesizedMember(o.Pool)
		pool.Spec.Accelerator.Type = policy.GPUType(&list.Items[0])
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return pool, list.Items, nil
}

// scaleUp adds the named nodes, or count nodes the plan picks, to the pool.
func (o *ScaleOptions) scaleUp(ctx context.Context, pool *v1alpha1.Pool, current int, named []string, count int) error {
	var picked []*corev1.Node
	if len(named) > 0 {
		var errs []error
		for _, name := range kit.Dedupe(named) {
			n, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if err := policy.CheckScaleUpCandidate(pool, n); err != nil {
				errs = append(errs, err)
				continue
			}
			picked = append(picked, n)
		}
		if len(errs) > 0 {
			return fmt.Errorf("pool %q was not scaled:\n%w", pool.Name, errors.Join(errs...))
		}
	} else {
		list, err := o.clients.Kube.CoreV1().Nodes().List(ctx, kit.ListBySelector(kit.PoolSelector(policy.DefaultPool)))
		if err != nil {
			return err
		}
		nodes := make([]*corev1.Node, len(list.Items))
		for i := range list.Items {
			nodes[i] = &list.Items[i]
		}
		if picked, err = policy.PlanScaleUp(pool, nodes, count); err != nil {
			return err
		}
	}
	var joined []string
	progress := &scaleUpProgress{pool: pool.Name}
	interrupt.InFlight.Set(progress.describe)
	defer interrupt.InFlight.Clear()
	for _, n := range picked {
		node, _, err := kit.UpdateNode(ctx, o.clients, n.Name, o.DryRun, func(n *corev1.Node) error {
			if err := policy.CheckScaleUpCandidate(pool, n); err != nil { // it may have changed since the plan
				return err
			}
			policy.ApplyJoin(pool, n)
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%v", interrupt.StoppedBecause(ctx, err))
			}
			return o.undoJoins(ctx, pool, joined, fmt.Errorf("adding node %q to pool %q: %w", n.Name, pool.Name, err))
		}
		joined = append(joined, n.Name)
		progress.joined(n.Name)
		o.poolEvent(ctx, node, pool.Name, false, "AddedToPool", "node %s added to pool %s", n.Name, pool.Name)
		fmt.Fprintf(o.Out, "node/%s added to pool %s%s\n", n.Name, pool.Name, o.Suffix())
	}
	fmt.Fprintf(o.Out, "pool.runwhere.ai/%s scaled from %d to %d node(s)%s\n", pool.Name, current, current+len(picked), o.Suffix())
	return nil
}

func (o *ScaleOptions) undoJoins(ctx context.Context, pool *v1alpha1.Pool, joined []string, cause error) error {
	ctx, cancel := interrupt.RollbackContext(ctx)
	defer cancel()
	for _, name := range joined {
		if _, _, err := kit.UpdateNode(ctx, o.clients, name, o.DryRun, func(n *corev1.Node) error {
			policy.ApplyLeave(pool, n)
			return nil
		}); err != nil {
			return fmt.Errorf("%w; putting node %q back in the default pool also failed: %v", cause, name, err)
		}
	}
	if len(joined) > 0 {
		return fmt.Errorf("%w; node(s) %s were put back in the default pool", cause, strings.Join(joined, ", "))
	}
	return cause
}

// scaleDown removes the named nodes, or count nodes the plan picks: cordon all, drain
// each, and only when every drain succeeded, take them out of the pool.
func (o *ScaleOptions) scaleDown(ctx context.Context, pool *v1alpha1.Pool, members []corev1.Node, named []string, count int) error {
	candidates, pods, err := o.candidates(ctx, pool, members)
	if err != nil {
		return err
	}
	var remove []string
	if len(named) > 0 {
		if err := policy.CheckScaleDownNodes(pool, candidates, named); err != nil {
			return err
		}
		remove = named
	} else if remove, err = policy.PlanScaleDown(pool, candidates, count); err != nil {
		return err
	}
	var errs []error
	for _, name := range remove {
		errs = append(errs, nodeops.CheckDrain(ctx, o.clients.Kube, name, o.Drain))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool %q was not scaled:\n%w", pool.Name, err)
	}
	if err := o.Mutation.Confirm(o.IOStreams, o.risk(pool, len(members), remove, pods), ""); err != nil {
		return err
	}
	progress := &scaleDownProgress{pool: pool.Name}
	interrupt.InFlight.Set(progress.describe)
	defer interrupt.InFlight.Clear()
	touched, err := o.cordonAll(ctx, pool, remove, progress)
	if err != nil {
		return o.putBack(ctx, pool, touched, err)
	}
	d := o.Drain
	d.DryRun, d.Out, d.ErrOut = o.DryRun, o.Out, o.ErrOut
	for _, name := range remove {
		if err := nodeops.Drain(ctx, o.clients.Kube, name, d); err != nil {
			return o.putBack(ctx, pool, touched, err)
		}
		fmt.Fprintf(o.Out, "node/%s drained%s\n", name, o.Suffix())
	}
	progress.leaving()
	for _, name := range remove {
		if err := o.leave(ctx, pool, name); err != nil {
			return fmt.Errorf("scale-down of pool %q: %w; run the command again to finish it", pool.Name, err)
		}
	}
	fmt.Fprintf(o.Out, "pool.runwhere.ai/%s scaled from %d to %d node(s)%s\n", pool.Name, len(members), len(members)-len(remove), o.Suffix())
	return nil
}

// candidates describes the members for the plan: workload pods, accelerators in use,
// and whether an interrupted scale-down of this pool started on them.
func (o *ScaleOptions) candidates(ctx context.Context, pool *v1alpha1.Pool, members []corev1.Node) ([]policy.ScaleCandidate, map[string][]string, error) {
	names := map[string]bool{}
	for _, m := range members {
		names[m.Name] = true
	}
	active, err := kit.ActivePods(ctx, o.clients, names)
	if err != nil {
		return nil, nil, err
	}
	b := inventory.NewBuilder()
	pods := map[string][]string{}
	for i := range active {
		p := &active[i]
		b.AddPod(p)
		if inventory.IsWorkloadPod(p) {
			pods[p.Spec.NodeName] = append(pods[p.Spec.NodeName], p.Namespace+"/"+p.Name)
		}
	}
	resuming := map[string]bool{}
	for i := range members {
		b.AddNode(&members[i])
		resuming[members[i].Name] = members[i].Annotations[policy.AnnotationScaleDown] == pool.Name
	}
	inv := b.Build()
	out := make([]policy.ScaleCandidate, len(inv.Nodes))
	for i, n := range inv.Nodes {
		out[i] = policy.ScaleCandidate{Name: n.Name, State: n.State, WorkloadPods: n.WorkloadPods, Used: n.Used, Resuming: resuming[n.Name]}
	}
	return out, pods, nil
}

func (o *ScaleOptions) risk(pool *v1alpha1.Pool, current int, remove []string, pods map[string][]string) kit.Risk {
	var evicted []string
	for _, n := range remove {
		evicted = append(evicted, pods[n]...)
	}
	fate := "leave the pool and return, uncordoned, to the default pool"
	if o.DeleteNode {
		fate = "leave the pool and their Node objects are deleted"
	}
	impact := []string{fmt.Sprintf("node(s) %s are cordoned and drained, then %s", strings.Join(remove, ", "), fate)}
	if len(evicted) > 0 {
		impact = append(impact, fmt.Sprintf("%d workload pod(s) are evicted: %s", len(evicted), kit.Summarize(evicted, 5)))
	} else {
		impact = append(impact, "no workload pods run on them")
	}
	return kit.Risk{
		Level:      "high",
		Operation:  fmt.Sprintf("scale down pool %q from %d to %d node(s)", pool.Name, current, current-len(remove)),
		Impact:     impact,
		Precaution: []string{"let jobs checkpoint first; PodDisruptionBudgets are respected, and a blocked drain puts everything back"},
	}
}

// cordonAll marks each node as being scaled down and cordons it, remembering whether it
// was cordoned before. It returns the nodes it touched.
func (o *ScaleOptions) cordonAll(ctx context.Context, pool *v1alpha1.Pool, remove []string, progress *scaleDownProgress) ([]string, error) {
	var touched []string
	for _, name := range remove {
		node, _, err := kit.UpdateNode(ctx, o.clients, name, o.DryRun, func(n *corev1.Node) error {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[policy.AnnotationScaleDown] = pool.Name
			policy.ApplyCordon(policy.CordonScaleDown, n)
			return nil
		})
		if err != nil {
			return touched, err
		}
		touched = append(touched, name)
		progress.touched(name, node.Annotations[policy.CordonScaleDown.Annotation()] == "true")
		o.poolEvent(ctx, node, pool.Name, false, "RemovingFromPool", "removing node %s from pool %s", name, pool.Name)
		fmt.Fprintf(o.Out, "node/%s cordoned%s\n", name, o.Suffix())
	}
	return touched, nil
}

// putBack undoes cordonAll after a failure: each node is uncordoned unless it was
// cordoned before, and loses its scale-down mark. Pods already evicted are not brought
// back; their controllers recreate them.
func (o *ScaleOptions) putBack(ctx context.Context, pool *v1alpha1.Pool, touched []string, cause error) error {
	why := interrupt.StoppedBecause(ctx, cause)
	ctx, cancel := interrupt.RollbackContext(ctx)
	defer cancel()
	var restored, failed []string
	for _, name := range touched {
		var stay bool
		var heldBy []string
		node, _, err := kit.UpdateNode(ctx, o.clients, name, o.DryRun, func(n *corev1.Node) error {
			delete(n.Annotations, policy.AnnotationScaleDown)
			heldBy, stay = policy.ApplyRelease(policy.CordonScaleDown, n)
			return nil
		})
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		o.poolEvent(ctx, node, pool.Name, true, "ScaleDownStopped", "scale-down of pool %s stopped: node %s stays in the pool: %v", pool.Name, name, why)
		restored = append(restored, name+cordonFate(stay, heldBy))
	}
	msg := fmt.Sprintf("scale-down of pool %q stopped: %v\nno node left the pool; put back: %s", pool.Name, why, kit.OrNoneList(restored))
	if len(failed) > 0 {
		msg += fmt.Sprintf("\ncould not put back: %s; run the command again to finish the scale-down, or put them back with: kubectl annotate node %s %s- && kubectl litepool uncordon %s",
			strings.Join(failed, ", "), strings.Join(touched, " "), policy.AnnotationScaleDown, strings.Join(touched, " "))
	}
	return errors.New(msg)
}

// cordonFate says how a node a scale-down let go was left.
func cordonFate(stay bool, heldBy []string) string {
	switch {
	case len(heldBy) > 0:
		return " (stays cordoned: litepool's " + strings.Join(heldBy, ", ") + " still holds it)"
	case stay:
		return " (stays cordoned, as it was before)"
	}
	return " (uncordoned)"
}

// leave takes a drained node out of the pool and, in the same update, lets it go
// (uncordoned in the default pool unless it was cordoned before or another operation
// holds it) and drops the scale-down mark: there is no moment when the node is out of
// the pool yet still cordoned by the scale-down, which "run the command again" could
// not reach. With --delete-node the node is deleted straight from the pool: if the
// deletion fails, it is still marked and the command resumes with it.
func (o *ScaleOptions) leave(ctx context.Context, pool *v1alpha1.Pool, name string) error {
	if o.DeleteNode {
		if o.DryRun != cmdutil.DryRunClient {
			err := interrupt.RetryStaleAdmission(ctx, func() error {
				return o.clients.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{DryRun: kit.ServerDryRun(o.DryRun)})
			})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting node %q: %w", name, err)
			}
		}
		fmt.Fprintf(o.Out, "node/%s removed from pool %s%s\n", name, pool.Name, o.Suffix())
		fmt.Fprintf(o.Out, "node/%s deleted%s\n", name, o.Suffix())
		return nil
	}
	var stay bool
	var heldBy []string
	var node *corev1.Node
	err := interrupt.RetryStaleAdmission(ctx, func() (err error) {
		node, _, err = kit.UpdateNode(ctx, o.clients, name, o.DryRun, func(n *corev1.Node) error {
			policy.ApplyLeave(pool, n)
			delete(n.Annotations, policy.AnnotationScaleDown)
			heldBy, stay = policy.ApplyRelease(policy.CordonScaleDown, n)
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("removing node %q from the pool: %w", name, err)
	}
	o.poolEvent(ctx, node, pool.Name, false, "RemovedFromPool", "node %s removed from pool %s", name, pool.Name)
	fmt.Fprintf(o.Out, "node/%s removed from pool %s%s\n", name, pool.Name, o.Suffix())
	if !stay {
		fmt.Fprintf(o.Out, "node/%s uncordoned%s\n", name, o.Suffix())
	} else if len(heldBy) > 0 {
		fmt.Fprintf(o.Out, "node/%s stays cordoned: litepool's %s still holds it%s\n", name, strings.Join(heldBy, ", "), o.Suffix())
	}
	return nil
}

// scaleUpProgress is what a running scale-up has done, for the message of a second
// Ctrl-C (which skips putting the joined nodes back).
type scaleUpProgress struct {
	mu    sync.Mutex
	pool  string
	nodes []string
}

func (p *scaleUpProgress) joined(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes = append(p.nodes, name)
}

func (p *scaleUpProgress) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.nodes) == 0 {
		return fmt.Sprintf("scale-up of pool %s: no node had joined yet", p.pool)
	}
	return fmt.Sprintf("scale-up of pool %s stopped half-way: node(s) %s joined.\nFinish it (with --add, leave out the nodes that joined):\n  %s\nOr put them back in the default pool:\n  kubectl litepool scale %s --remove %s --yes",
		p.pool, strings.Join(p.nodes, ", "), interrupt.CommandLine(), p.pool, strings.Join(p.nodes, ","))
}

// scaleDownProgress is what a running scale-down has changed, for the message of a
// second Ctrl-C (which skips the put-back).
type scaleDownProgress struct {
	mu          sync.Mutex
	pool        string
	nodes       []string
	wasCordoned []string
	left        bool
}

func (p *scaleDownProgress) touched(name string, wasCordoned bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes = append(p.nodes, name)
	if wasCordoned {
		p.wasCordoned = append(p.wasCordoned, name)
	}
}

func (p *scaleDownProgress) leaving() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left = true
}

func (p *scaleDownProgress) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.nodes) == 0 {
		return fmt.Sprintf("scale-down of pool %s: nothing was changed yet", p.pool)
	}
	nodes := strings.Join(p.nodes, " ")
	msg := fmt.Sprintf("scale-down of pool %s left node(s) %s cordoned and marked %s=%s", p.pool, strings.Join(p.nodes, ", "), policy.AnnotationScaleDown, p.pool)
	if p.left {
		msg += "; some may have left the pool already"
	}
	msg += fmt.Sprintf(".\nResume it (it picks the marked nodes first):\n  %s\n", interrupt.CommandLine())
	var uncordon []string
	for _, n := range p.nodes {
		if !slices.Contains(p.wasCordoned, n) {
			uncordon = append(uncordon, n)
		}
	}
	msg += fmt.Sprintf("Or put them back:\n  kubectl annotate node %s %s- %s- %s-", nodes, policy.AnnotationScaleDown, policy.AnnotationDraining, policy.CordonScaleDown.Annotation())
	if len(uncordon) > 0 {
		msg += "\n  kubectl uncordon " + strings.Join(uncordon, " ")
	}
	return msg
}

func (o *ScaleOptions) poolEvent(ctx context.Context, node *corev1.Node, pool string, warning bool, reason, format string, args ...any) {
	if o.Recorder == nil || node == nil {
		return
	}
	ref := events.NodeRef(node).About(events.PoolRef(pool))
	if warning {
		_ = o.Recorder.Warning(ctx, ref, reason, format, args...)
		return
	}
	_ = o.Recorder.Normal(ctx, ref, reason, format, args...)
}
