package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os/user"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var _ = register(NewCmdDelete)

// NewCmdDelete is `kubectl litepool delete NOUN NAME`.
func NewCmdDelete(f cmdutil.Factory, streams genericiooptions.IOStreams) *cobra.Command {
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
	Mutation
	Name  string
	Force bool

	clients *clients
	genericiooptions.IOStreams
}

// NewCmdDeletePool is `kubectl litepool delete pool NAME`.
func NewCmdDeletePool(f cmdutil.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DeletePoolOptions{IOStreams: streams}
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
		ValidArgsFunction: completePoolNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			c, err := newClients(f)
			if err != nil {
				return err
			}
			o.clients = c
			if err := o.Mutation.complete(cmd, c); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "Delete the pool although workload pods run on its nodes; the pods keep running")
	addYesFlag(cmd, &o.Mutation)
	addDryRunFlag(cmd)
	return cmd
}

// Run checks, confirms, deletes the Pool object, then releases the nodes.
func (o *DeletePoolOptions) Run(ctx context.Context) error {
	if o.Name == policy.DefaultPool {
		return fmt.Errorf("[R1] the default pool cannot be deleted: it is the nodes that belong to no pool")
	}
	pool, err := poolObject(ctx, o.clients, o.Name)
	if err != nil {
		return err
	}
	members, err := o.clients.kube.CoreV1().Nodes().List(ctx, listBySelector(poolSelector(o.Name)))
	if err != nil {
		return err
	}
	if pool == nil && len(members.Items) == 0 {
		return poolNotFound(o.Name)
	}
	names := map[string]bool{}
	for _, n := range members.Items {
		names[n.Name] = true
	}
	pods, err := workloadPodsOn(ctx, o.clients, names)
	if err != nil {
		return err
	}
	var all []string
	for _, n := range members.Items {
		all = append(all, pods[n.Name]...)
	}
	check := pool
	if check == nil {
		p := synthesizedPool(o.Name)
		check = &p
	}
	if err := policy.CheckPoolDelete(check, all); err != nil && !o.Force {
		return err
	}
	if err := confirm(o.IOStreams, &o.Mutation, o.risk(len(members.Items), len(all)), o.Name); err != nil {
		return err
	}
	if pool != nil {
		if err := o.deleteObject(ctx, pool, len(all) > 0); err != nil {
			return err
		}
	}
	for i := range members.Items {
		if err := o.release(ctx, pool, &members.Items[i], len(pods[members.Items[i].Name]) > 0); err != nil {
			return fmt.Errorf("pool %q was deleted, but releasing node %q failed: %w; run the command again to release the rest", o.Name, members.Items[i].Name, err)
		}
	}
	return nil
}

func (o *DeletePoolOptions) risk(nodes, pods int) Risk {
	r := Risk{
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

// deleteObject deletes the Pool; with running pods it first records the confirmation
// annotation the webhook's R2 looks for.
func (o *DeletePoolOptions) deleteObject(ctx context.Context, pool *v1alpha1.Pool, confirmed bool) error {
	if confirmed && o.DryRun != cmdutil.DryRunClient {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{policy.AnnotationConfirmDelete: pool.Name}}})
		if _, err := o.clients.pools.Patch(ctx, pool.Name, types.MergePatchType, patch, metav1.PatchOptions{DryRun: serverDryRun(o.DryRun)}); err != nil {
			return err
		}
	}
	if o.DryRun != cmdutil.DryRunClient {
		if err := o.clients.pools.Delete(ctx, pool.Name, metav1.DeleteOptions{DryRun: serverDryRun(o.DryRun)}); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "pool.runwhere.ai/%s deleted%s\n", pool.Name, o.suffix())
	return nil
}

// release takes a node out of the deleted pool. A node that still runs workload pods
// carries the audited override runwhere.ai/force while its labels go (the webhook's
// N3 would refuse otherwise); the override is removed right after.
func (o *DeletePoolOptions) release(ctx context.Context, pool *v1alpha1.Pool, member *corev1.Node, busy bool) error {
	force := fmt.Sprintf("kubectl litepool delete pool %s --force by %s", o.Name, whoAmI())
	node, changed, err := updateNode(ctx, o.clients, member.Name, o.DryRun, func(n *corev1.Node) error {
		policy.ApplyLeave(pool, n)
		if busy {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[policy.AnnotationForce] = force
		}
		return nil
	})
	if err != nil || !changed {
		return err
	}
	if busy {
		_, _, err = updateNode(ctx, o.clients, member.Name, o.DryRun, func(n *corev1.Node) error {
			delete(n.Annotations, policy.AnnotationForce)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if o.recorder != nil {
		_ = o.recorder.Normal(ctx, events.NodeRef(node).About(events.PoolRef(o.Name)), "RemovedFromPool",
			"node %s removed from pool %s: the pool was deleted", member.Name, o.Name)
	}
	fmt.Fprintf(o.Out, "node/%s unlabeled%s\n", member.Name, o.suffix())
	return nil
}

func whoAmI() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown user"
}
