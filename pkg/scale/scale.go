// Package scale grows and shrinks a pool: the workflow behind `kubectl litepool scale`,
// as a library. A scale-up joins nodes of the default pool and, if one join fails,
// puts the joined ones back. A scale-down marks and cordons every node it takes, drains
// each as kubectl drain does, and only when every drain succeeded takes them out of
// the pool; a failure or an interruption puts every node back as it was. A scale-down
// cut short leaves its nodes marked (runwhere.ai/scale-down), and the next one resumes
// with them.
package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Printer is where a scale operation reports: every object it changed, with what
// happened to it ("added to pool p"), and lines about no single object.
type Printer interface {
	Print(obj runtime.Object, operation string) error
	Say(format string, args ...any)
}

// Plan is a scale-down about to start, for the caller's confirmation.
type Plan struct {
	Pool    string
	Current int
	Remove  []string
	// Pods are the workload pods ("namespace/name") of each node to remove.
	Pods map[string][]string
}

// Scaler scales one pool.
type Scaler struct {
	Kube         kubernetes.Interface
	DryRun       cmdutil.DryRunStrategy
	Accelerators policy.Accelerators
	// Drain is how each node is drained (its DryRun is the Scaler's).
	Drain nodeops.DrainOptions
	// DeleteNode deletes the Node objects of removed nodes.
	DeleteNode bool
	Recorder   *events.Recorder
	Printer    Printer
	// Confirm is asked once a scale-down is planned and checked, before it changes
	// anything; an error stops it. Nil asks nothing.
	Confirm func(Plan) error
}

// errAlreadyIn is a join that finds its node already in the pool: another change (a
// concurrent scale, or the operator) put it there first.
var errAlreadyIn = errors.New("already in the pool")

// Up adds the named nodes, or nodes the plan picks until the pool has current+count
// members, to pool, which has current members. A node found already in the pool is
// reported and left there, and a scale by count that finds its target reached (a
// concurrent scale added the nodes) stops there: both succeed and say so, as two
// concurrent `scale --nodes N` both reach N.
func (s *Scaler) Up(ctx context.Context, pool *v1alpha1.Pool, current int, named []string, count int) error {
	target := current + count
	var joined []string
	progress := &upProgress{pool: pool.Name}
	interrupt.InFlight.Set(progress.describe)
	defer interrupt.InFlight.Clear()
	have := current
	// Every round plans from what the cluster shows now; a round ends early when the
	// pool reached its target. Rounds are bounded: each one joins a node or finds one
	// joined by someone else, or fails to plan.
	for round := 0; round <= count+len(named); round++ {
		picked, err := s.pickUp(ctx, pool, named, target-have)
		if err != nil && len(named) == 0 && s.DryRun == cmdutil.DryRunNone {
			// A concurrent scale may have taken the nodes this plan wanted: if the pool
			// grew since it was counted, plan again from what it has now.
			if grown, merr := s.members(ctx, pool, have); merr == nil && grown > have {
				have = grown
				if have >= target {
					break
				}
				continue
			}
		}
		if err != nil {
			return s.undoJoins(ctx, pool, joined, err)
		}
		progressed := false
		for i, n := range picked {
			if len(named) == 0 && (round > 0 || i > 0) {
				if have, err = s.members(ctx, pool, have); err != nil {
					return s.undoJoins(ctx, pool, joined, err)
				}
				if have >= target {
					break
				}
			}
			node, _, err := nodeops.ModifyNode(ctx, s.Kube, n.Name, s.DryRun, func(n *corev1.Node) error {
				if policy.PoolOf(n) == pool.Name {
					return errAlreadyIn
				}
				if err := policy.CheckScaleUpCandidate(pool, n); err != nil { // it may have changed since the plan
					return err
				}
				policy.ApplyJoin(pool, n)
				return nil
			})
			if errors.Is(err, errAlreadyIn) {
				progressed = true
				if err := s.Printer.Print(n, "already in pool "+pool.Name); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				if ctx.Err() != nil {
					err = fmt.Errorf("%v", interrupt.StoppedBecause(ctx, err))
				}
				return s.undoJoins(ctx, pool, joined, fmt.Errorf("adding node %q to pool %q: %w", n.Name, pool.Name, err))
			}
			progressed = true
			joined = append(joined, n.Name)
			progress.joined(n.Name)
			s.poolEvent(ctx, node, pool.Name, false, "AddedToPool", "node %s added to pool %s", n.Name, pool.Name)
			if err := s.Printer.Print(node, "added to pool "+pool.Name); err != nil {
				return err
			}
		}
		if len(named) > 0 || s.DryRun != cmdutil.DryRunNone { // a dry run wrote nothing to count
			have = current + len(joined)
			break
		}
		if have, err = s.members(ctx, pool, have); err != nil {
			return s.undoJoins(ctx, pool, joined, err)
		}
		if have >= target || !progressed {
			break
		}
	}
	if len(joined) == 0 {
		return s.Printer.Print(pool, fmt.Sprintf("already has %d node(s)", have))
	}
	return s.Printer.Print(pool, fmt.Sprintf("scaled from %d to %d node(s)", current, have))
}

// members counts the pool's members now; under a dry run nothing was written, and the
// count is what the caller had.
func (s *Scaler) members(ctx context.Context, pool *v1alpha1.Pool, had int) (int, error) {
	if s.DryRun != cmdutil.DryRunNone {
		return had, nil
	}
	list, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + pool.Name})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// pickUp checks the named nodes (a node already in the pool is picked: Up reports it),
// or plans count nodes from the default pool.
func (s *Scaler) pickUp(ctx context.Context, pool *v1alpha1.Pool, named []string, count int) ([]*corev1.Node, error) {
	if len(named) == 0 {
		list, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!" + policy.LabelPool})
		if err != nil {
			return nil, err
		}
		nodes := make([]*corev1.Node, len(list.Items))
		for i := range list.Items {
			nodes[i] = &list.Items[i]
		}
		return policy.PlanScaleUp(pool, nodes, count)
	}
	var picked []*corev1.Node
	var errs []error
	for _, name := range dedupe(named) {
		n, err := s.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && policy.PoolOf(n) != pool.Name {
			err = policy.CheckScaleUpCandidate(pool, n)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		picked = append(picked, n)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("pool %q was not scaled:\n%w", pool.Name, errors.Join(errs...))
	}
	return picked, nil
}

func (s *Scaler) undoJoins(ctx context.Context, pool *v1alpha1.Pool, joined []string, cause error) error {
	ctx, cancel := interrupt.RollbackContext(ctx)
	defer cancel()
	for _, name := range joined {
		if _, _, err := nodeops.ModifyNode(ctx, s.Kube, name, s.DryRun, func(n *corev1.Node) error {
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

// Down removes the named nodes, or count nodes the plan picks, from pool, whose members
// are given: cordon all, drain each, and only when every drain succeeded, take them out
// of the pool.
func (s *Scaler) Down(ctx context.Context, pool *v1alpha1.Pool, members []corev1.Node, named []string, count int) error {
	candidates, pods, err := s.candidates(ctx, pool, members)
	if err != nil {
		return err
	}
	remove, err := s.planDown(pool, members, candidates, named, count)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range remove {
		errs = append(errs, nodeops.CheckDrain(ctx, s.Kube, name, s.Drain))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool %q was not scaled:\n%w", pool.Name, err)
	}
	if s.Confirm != nil {
		if err := s.Confirm(Plan{Pool: pool.Name, Current: len(members), Remove: remove, Pods: pods}); err != nil {
			return err
		}
	}
	progress := &downProgress{pool: pool.Name}
	interrupt.InFlight.Set(progress.describe)
	defer interrupt.InFlight.Clear()
	touched, err := s.cordonAll(ctx, pool, remove, progress)
	if err != nil {
		return s.putBack(ctx, pool, touched, err)
	}
	if err := s.drainAll(ctx, remove); err != nil {
		return s.putBack(ctx, pool, touched, err)
	}
	progress.leaving()
	for _, name := range remove {
		if err := s.leave(ctx, pool, name); err != nil {
			return fmt.Errorf("scale-down of pool %q: %w; run the command again to finish it", pool.Name, err)
		}
	}
	return s.Printer.Print(pool, fmt.Sprintf("scaled from %d to %d node(s)", len(members), len(members)-len(remove)))
}

// planDown checks the named nodes, or plans count nodes to remove: by domain on a pool
// with a topology (saying the plan and the largest free block before and after under a
// dry run), else by the flat rule.
func (s *Scaler) planDown(pool *v1alpha1.Pool, members []corev1.Node, candidates []policy.ScaleCandidate, named []string, count int) ([]string, error) {
	if !policy.HasTopology(pool) {
		if len(named) > 0 {
			return named, policy.CheckScaleDownNodes(pool, candidates, named)
		}
		return policy.PlanScaleDown(pool, candidates, count)
	}
	t, err := policy.ResolveTopology(pool.Spec.Topology)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", pool.Name, err)
	}
	nodes := make([]*corev1.Node, len(members))
	for i := range members {
		nodes[i] = &members[i]
	}
	ds := policy.NewDomainScale(pool, t, nodes)
	var plan policy.DomainPlan
	if len(named) > 0 {
		if err := ds.CheckScaleDownNodes(pool, candidates, named); err != nil {
			return nil, err
		}
		plan.Remove = named
	} else if plan, err = ds.PlanScaleDown(pool, candidates, count); err != nil {
		return nil, err
	}
	if s.DryRun != cmdutil.DryRunNone {
		s.sayPlan(pool, t, nodes, candidates, plan)
	}
	return plan.Remove, nil
}

// sayPlan tells a dry run how the domains fare: the plan, and the largest free block
// before and after it.
func (s *Scaler) sayPlan(pool *v1alpha1.Pool, t policy.Topology, nodes []*corev1.Node, candidates []policy.ScaleCandidate, plan policy.DomainPlan) {
	used := make(map[string]int64, len(candidates))
	for _, c := range candidates {
		used[c.Name] = c.Used
	}
	gone := make(map[string]bool, len(plan.Remove))
	for _, n := range plan.Remove {
		gone[n] = true
	}
	res := policy.BlockResource(pool, nodes, s.Accelerators)
	for _, line := range plan.Describe() {
		s.Printer.Say("plan: %s\n", line)
	}
	s.Printer.Say("largest free block: %s before, %s after\n",
		policy.LargestFreeBlock(t, nodes, used, res, nil), policy.LargestFreeBlock(t, nodes, used, res, gone))
}

// candidates describes the members for the plan: workload pods, accelerators in use,
// and whether an interrupted scale-down of this pool started on them.
func (s *Scaler) candidates(ctx context.Context, pool *v1alpha1.Pool, members []corev1.Node) ([]policy.ScaleCandidate, map[string][]string, error) {
	names := map[string]bool{}
	for _, m := range members {
		names[m.Name] = true
	}
	active, err := inventory.ActivePodsOn(ctx, s.Kube, names)
	if err != nil {
		return nil, nil, err
	}
	b := inventory.NewBuilder()
	b.Accelerators = s.Accelerators
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
		out[i] = policy.ScaleCandidate{Name: n.Name, State: n.State, WorkloadPods: n.WorkloadPods, Used: n.Used, Resuming: resuming[n.Name], Ready: n.Ready}
	}
	return out, pods, nil
}

// cordonAll marks each node as being scaled down and cordons it, remembering whether it
// was cordoned before. It returns the nodes it touched.
func (s *Scaler) cordonAll(ctx context.Context, pool *v1alpha1.Pool, remove []string, progress *downProgress) ([]string, error) {
	var touched []string
	for _, name := range remove {
		node, _, err := nodeops.ModifyNode(ctx, s.Kube, name, s.DryRun, func(n *corev1.Node) error {
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
		s.poolEvent(ctx, node, pool.Name, false, "RemovingFromPool", "removing node %s from pool %s", name, pool.Name)
		if err := s.Printer.Print(node, "cordoned"); err != nil {
			return touched, err
		}
	}
	return touched, nil
}

func (s *Scaler) drainAll(ctx context.Context, remove []string) error {
	d := s.Drain
	d.DryRun = s.DryRun
	for _, name := range remove {
		if err := nodeops.Drain(ctx, s.Kube, name, d); err != nil {
			return err
		}
		node, err := s.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := s.Printer.Print(node, "drained"); err != nil {
			return err
		}
	}
	return nil
}

// putBack undoes cordonAll after a failure: each node is uncordoned unless it was
// cordoned before, and loses its scale-down mark. Pods already evicted are not brought
// back; their controllers recreate them.
func (s *Scaler) putBack(ctx context.Context, pool *v1alpha1.Pool, touched []string, cause error) error {
	why := interrupt.StoppedBecause(ctx, cause)
	ctx, cancel := interrupt.RollbackContext(ctx)
	defer cancel()
	var restored, failed []string
	for _, name := range touched {
		var stay bool
		var heldBy []string
		node, _, err := nodeops.ModifyNode(ctx, s.Kube, name, s.DryRun, func(n *corev1.Node) error {
			delete(n.Annotations, policy.AnnotationScaleDown)
			heldBy, stay = policy.ApplyRelease(policy.CordonScaleDown, n)
			return nil
		})
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		s.poolEvent(ctx, node, pool.Name, true, "ScaleDownStopped", "scale-down of pool %s stopped: node %s stays in the pool: %v", pool.Name, name, why)
		restored = append(restored, name+cordonFate(stay, heldBy))
	}
	msg := fmt.Sprintf("scale-down of pool %q stopped: %v\nno node left the pool; put back: %s", pool.Name, why, interrupt.OrNothingChanged(restored))
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
// not reach. With DeleteNode the node is deleted straight from the pool: if the
// deletion fails, it is still marked and the next scale-down resumes with it.
func (s *Scaler) leave(ctx context.Context, pool *v1alpha1.Pool, name string) error {
	if s.DeleteNode {
		return s.deleteNode(ctx, pool, name)
	}
	var stay bool
	var heldBy []string
	var node *corev1.Node
	err := interrupt.RetryStaleAdmission(ctx, func() (err error) {
		node, _, err = nodeops.ModifyNode(ctx, s.Kube, name, s.DryRun, func(n *corev1.Node) error {
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
	s.poolEvent(ctx, node, pool.Name, false, "RemovedFromPool", "node %s removed from pool %s", name, pool.Name)
	if err := s.Printer.Print(node, "removed from pool "+pool.Name); err != nil {
		return err
	}
	switch {
	case !stay:
		return s.Printer.Print(node, "uncordoned")
	case len(heldBy) > 0:
		return s.Printer.Print(node, "stays cordoned: litepool's "+strings.Join(heldBy, ", ")+" still holds it")
	}
	return nil
}

func (s *Scaler) deleteNode(ctx context.Context, pool *v1alpha1.Pool, name string) error {
	node, err := s.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %q: %w", name, err)
	}
	if node == nil || apierrors.IsNotFound(err) {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	if s.DryRun != cmdutil.DryRunClient {
		opts := metav1.DeleteOptions{DryRun: nodeops.ServerDryRun(s.DryRun)}
		err := interrupt.RetryStaleAdmission(ctx, func() error { return s.Kube.CoreV1().Nodes().Delete(ctx, name, opts) })
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting node %q: %w", name, err)
		}
	}
	if err := s.Printer.Print(node, "removed from pool "+pool.Name); err != nil {
		return err
	}
	return s.Printer.Print(node, "deleted")
}

func (s *Scaler) poolEvent(ctx context.Context, node *corev1.Node, pool string, warning bool, reason, format string, args ...any) {
	if s.Recorder == nil || node == nil {
		return
	}
	ref := events.NodeRef(node).About(events.PoolRef(pool))
	if warning {
		_ = s.Recorder.Warning(ctx, ref, reason, format, args...)
		return
	}
	_ = s.Recorder.Normal(ctx, ref, reason, format, args...)
}
