// Package delete is `kubectl litepool delete pool`: it releases the nodes, then deletes
// the Pool object, so that an interrupted deletion is finished by running it again.
// (The release is policy.ApplyLeave and an audited override, glue enough to stay here
// rather than become a workflow library.)
package delete

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// NewCmdDelete is `kubectl litepool delete NOUN NAME`.
func NewCmdDelete(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a pool, returning its nodes to the default pool",
		Long:  templates.LongDesc(`Delete a pool. Its nodes return to the default pool; running work is not stopped.`),
		Example: templates.Examples(`
			kubectl litepool delete pool dev-sandbox`),
	}
	cmd.AddCommand(NewCmdDeletePool(f, streams))
	return cmd
}

// DeletePoolOptions is `delete pool`.
type DeletePoolOptions struct {
	kit.Mutation
	Name  string
	Force bool

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdDeletePool is `kubectl litepool delete pool NAME`.
func NewCmdDeletePool(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DeletePoolOptions{Mutation: kit.NewMutation(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "pool NAME",
		Aliases: []string{"pools", "lpool"},
		Short:   "Delete a pool; its nodes return to the default pool",
		Long: templates.LongDesc(`
			Delete a pool: its Pool object goes, and its nodes lose the pool's labels
			(runwhere.ai/pool, runwhere.ai/node-pool, the labels and taints their node
			pool gave them, the exclusive-pool taint) and so return to the default
			pool. A pool that exists only as node labels (as gpuctl makes them) is
			deleted by removing those labels.

			Risk: critical. The command shows what will happen and asks you to type
			the pool's name; --yes skips the question.

			While workload pods (not DaemonSet pods, not finished pods) run on the
			pool's nodes the deletion is refused (rule R2). --force goes ahead anyway:
			the pods are not stopped or evicted, they keep running on nodes that now
			belong to the default pool. The override is recorded on the Pool object
			(runwhere.ai/confirm-delete) and on the nodes (runwhere.ai/force) for the
			admission webhook, which enforces the same rule.`),
		Example: templates.Examples(`
			# Delete an idle pool, confirming by typing its name
			kubectl litepool delete pool dev-sandbox

			# In a script
			kubectl litepool delete pool dev-sandbox --yes

			# Delete a pool although jobs still run on it (they keep running)
			kubectl litepool delete pool train-a100 --force --yes`),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "Delete the pool although workload pods run on its nodes; the pods keep running")
	o.Mutation.AddFlags(cmd, true)
	return kit.Bind(cmd, f, o)
}

// Complete reads the pool name and builds the clients.
func (o *DeletePoolOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Name = args[0]
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Validate checks -o.
func (o *DeletePoolOptions) Validate() error { return o.Mutation.Validate() }

// Run checks, confirms, releases the nodes, then deletes the Pool object. The object
// goes last so that an interrupted deletion is still there to run again: a re-run
// releases what is left (members, and nodes a release left half-done) and finishes.
func (o *DeletePoolOptions) Run(ctx context.Context) error {
	if o.Name == policy.DefaultPool {
		return policy.Violationf("R1", "the default pool cannot be deleted: it is the nodes that belong to no pool")
	}
	pool, err := kit.NewCatalog(ctx, o.clients).Object(o.Name)
	if err != nil {
		return err
	}
	nodes, err := o.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var members []corev1.Node
	for _, n := range nodes.Items {
		if policy.PoolOf(&n) == o.Name || o.releaseUnfinished(&n) {
			members = append(members, n)
		}
	}
	if pool == nil && len(members) == 0 {
		return kit.PoolNotFound(o.Name)
	}
	names := map[string]bool{}
	for _, n := range members {
		names[n.Name] = true
	}
	pods, err := inventory.WorkloadPodsOn(ctx, o.clients.Kube, names)
	if err != nil {
		return err
	}
	var all []string
	for _, n := range members {
		all = append(all, pods[n.Name]...)
	}
	check := pool
	if check == nil {
		p := kit.SynthesizedPool(o.Name)
		check = &p
	}
	if err := policy.CheckPoolDelete(check, all); err != nil && !o.Force {
		return err
	}
	if err := o.Mutation.Confirm(o.IOStreams, o.risk(len(members), len(all)), o.Name); err != nil {
		return err
	}
	progress := &deleteProgress{pool: o.Name}
	interrupt.InFlight.Set(progress.describe)
	defer interrupt.InFlight.Clear()
	confirmed := len(all) > 0
	if pool != nil && confirmed {
		// Recorded first: the webhook's R2 then admits the final delete whatever its
		// cache still says about the pods.
		if err := o.confirmDelete(ctx, pool); err != nil {
			return err
		}
	}
	for i := range members {
		if err := o.release(ctx, pool, &members[i]); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("pool %q: deletion %s while releasing node %q; the Pool object is kept: run the command again to release the rest and delete it", o.Name, interrupt.StoppedBecause(ctx, err), members[i].Name)
			}
			return fmt.Errorf("pool %q: releasing node %q failed: %w; the Pool object is kept: run the command again to release the rest and delete it", o.Name, members[i].Name, err)
		}
		progress.released(members[i].Name)
	}
	if pool != nil {
		if err := o.deleteObject(ctx, pool, confirmed); err != nil {
			return fmt.Errorf("pool %q: every node was released, but deleting the Pool object failed: %w; run the command again to delete it", o.Name, err)
		}
	}
	return nil
}

// forceReason is the why of the runwhere.ai/force annotation this deletion writes.
func (o *DeletePoolOptions) forceReason() string {
	return fmt.Sprintf("kubectl litepool delete pool %s --force", o.Name)
}

// releaseUnfinished says whether a node that is no longer a member still carries what a
// release of this pool leaves until its last step: this deletion's runwhere.ai/force,
// or the pool's exclusive taint.
func (o *DeletePoolOptions) releaseUnfinished(n *corev1.Node) bool {
	if _, why, err := policy.ParseForce(n.Annotations[policy.AnnotationForce]); err == nil && why == o.forceReason() {
		return true
	}
	exclusive := policy.ExclusiveTaint(o.Name)
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&exclusive) && t.Value == exclusive.Value })
}

func (o *DeletePoolOptions) risk(nodes, pods int) kit.Risk {
	r := kit.Risk{
		Level:     "critical",
		Operation: fmt.Sprintf("delete pool %q", o.Name),
		Impact: []string{
			fmt.Sprintf("%d node(s) lose the pool's labels and taints and return to the default pool", nodes),
			"workloads that select this pool can no longer be scheduled",
		},
		Precaution: []string{"stop the pool's jobs and services first, and save their data"},
	}
	if pods > 0 {
		r.Impact = append(r.Impact, fmt.Sprintf("%d workload pod(s) keep running on nodes outside the pool (--force)", pods))
	}
	return r
}

// confirmDelete records the confirmation annotation the webhook's R2 looks for.
func (o *DeletePoolOptions) confirmDelete(ctx context.Context, pool *v1alpha1.Pool) error {
	if o.DryRun != cmdutil.DryRunNone || pool.Annotations[policy.AnnotationConfirmDelete] == pool.Name {
		return nil // a dry run must change nothing; deleteObject accounts for it
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{policy.AnnotationConfirmDelete: pool.Name}}})
	_, err := o.clients.Pools.Patch(ctx, pool.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// deleteObject deletes the Pool. Under a server dry run of a confirmed deletion the
// confirmation was not written (a dry run changes nothing), so the API server would
// judge the delete without it: the delete is then not sent, and the output says so.
func (o *DeletePoolOptions) deleteObject(ctx context.Context, pool *v1alpha1.Pool, confirmed bool) error {
	switch {
	case o.DryRun == cmdutil.DryRunServer && confirmed && pool.Annotations[policy.AnnotationConfirmDelete] != pool.Name:
		if o.Output() != "" {
			return o.Print(o.Out, pool, "deleted")
		}
		_, err := fmt.Fprintf(o.Out, "pool.runwhere.ai/%s deleted (server dry run; the delete itself was not sent: it needs %s written first)\n", pool.Name, policy.AnnotationConfirmDelete)
		return err
	case o.DryRun != cmdutil.DryRunClient:
		err := o.clients.Pools.Delete(ctx, pool.Name, metav1.DeleteOptions{DryRun: nodeops.ServerDryRun(o.DryRun)})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return o.Print(o.Out, pool, "deleted")
}

// release takes a node out of the pool in two updates. The first removes the pool's
// labels and taints (policy.ApplyLeave) and, in the same update, writes the audited
// override runwhere.ai/force="<user>: kubectl litepool delete pool P --force" (the
// webhook's N3 would refuse a busy node, or the pool's floor, otherwise). The second
// removes the override. A node someone else had forced keeps their annotation. A
// release interrupted between the two is found again by releaseUnfinished.
func (o *DeletePoolOptions) release(ctx context.Context, pool *v1alpha1.Pool, member *corev1.Node) error {
	ours := fmt.Sprintf("%s: %s", kit.WhoAmI(), o.forceReason())
	node, changed, err := nodeops.ModifyNode(ctx, o.clients.Kube, member.Name, o.DryRun, func(n *corev1.Node) error {
		policy.ApplyLeave(pool, n)
		if n.Annotations[policy.AnnotationForce] == "" { // ours from an interrupted run, or someone's own: kept
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[policy.AnnotationForce] = ours
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, unforced, err := nodeops.ModifyNode(ctx, o.clients.Kube, member.Name, o.DryRun, func(n *corev1.Node) error {
		if _, why, err := policy.ParseForce(n.Annotations[policy.AnnotationForce]); err == nil && why == o.forceReason() {
			delete(n.Annotations, policy.AnnotationForce)
		}
		return nil
	})
	if err != nil {
		return err
	}
	changed = changed || unforced
	if !changed {
		return nil
	}
	if o.Recorder != nil {
		_ = o.Recorder.Normal(ctx, events.NodeRef(node).About(events.PoolRef(o.Name)), "RemovedFromPool",
			"node %s removed from pool %s: the pool was deleted", member.Name, o.Name)
	}
	return o.Print(o.Out, node, "unlabeled")
}

// deleteProgress is what a running deletion has done, for the message of a second
// Ctrl-C.
type deleteProgress struct {
	mu   sync.Mutex
	pool string
	done []string
}

func (p *deleteProgress) released(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = append(p.done, node)
}

func (p *deleteProgress) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("deletion of pool %s stopped half-way: node(s) released: %s; the Pool object (if it has one) is still there, with the nodes not yet released.\nFinish it:\n  %s",
		p.pool, interrupt.OrNothingChanged(p.done), interrupt.CommandLine())
}
