package plugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var _ = register(NewCmdLabel)

// NewCmdLabel is `kubectl litepool label NOUN ...`.
func NewCmdLabel(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "label",
		Short: "Set or remove litepool labels (runwhere.ai/...) on a node",
		Long: templates.LongDesc(`
			Set or remove the labels litepool manages on nodes. Every key must be a
			known litepool key: runwhere.ai/pool, runwhere.ai/node-pool,
			runwhere.ai/gpu-type, runwhere.ai/workload-type, runwhere.ai/health,
			runwhere.ai/driver-version.`),
		Example: templates.Examples(`
			kubectl litepool label node gpu-node-6 runwhere.ai/pool=training-pool`),
	}
	cmd.AddCommand(NewCmdLabelNode(f, streams))
	return cmd
}

// LabelNodeOptions is `label node`.
type LabelNodeOptions struct {
	kit.Mutation
	Node      string
	Set       map[string]string
	Remove    []string
	Overwrite bool

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdLabelNode is `kubectl litepool label node NODE KEY=VALUE... [KEY-...] [--overwrite]`.
func NewCmdLabelNode(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &LabelNodeOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "node NODE KEY=VALUE... [KEY-...]",
		Short: "Set or remove litepool labels on a node",
		Long: templates.LongDesc(`
			Set (KEY=VALUE) or remove (KEY-) litepool labels on a node.

			Keys are written in full: runwhere.ai/pool, not pool. A key without the
			runwhere.ai/ prefix is refused with the right key in the message; the
			prefix is never added for you, so it is never doubled. A key under
			runwhere.ai/ that litepool does not know is refused too, and values are
			checked (pool names, workload types, health values).

			A label that already has a different value is changed only with
			--overwrite. Changing runwhere.ai/pool moves the node between pools, so the
			membership rules apply first: the node must match the new pool's
			accelerator (N2) and may leave its old pool only when it runs no workload
			pods and the pool keeps its minNodes (N3). Joining or leaving an exclusive
			pool also adds or removes the pool's taint.`),
		Example: templates.Examples(`
			# Put a node of the default pool into training-pool (gpuctl's "label node")
			kubectl litepool label node gpu-node-6 runwhere.ai/pool=training-pool

			# Move it to another pool
			kubectl litepool label node gpu-node-6 runwhere.ai/pool=inference-pool --overwrite

			# Record its accelerator model, and remove it from its pool
			kubectl litepool label node gpu-node-6 runwhere.ai/gpu-type=A100-100G runwhere.ai/pool-`),
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: kit.CompleteNodeNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(f, cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Overwrite, "overwrite", false, "Allow labels to be overwritten; otherwise a label with a different value is an error")
	cmdutil.AddDryRunFlag(cmd)
	return cmd
}

// Complete parses KEY=VALUE and KEY- arguments, checking every key and value first.
func (o *LabelNodeOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) error {
	o.Node = args[0]
	set, remove, err := ParseLabelArgs(args[1:])
	if err != nil {
		return err
	}
	o.Set, o.Remove = set, remove
	c, err := f.Clients()
	if err != nil {
		return err
	}
	o.clients = c
	return o.Mutation.Complete(cmd, c)
}

// ParseLabelArgs parses KEY=VALUE and KEY- arguments: keys must be litepool's own
// (policy.UserLabelKey) and values valid for them (policy.ValidateLabel).
func ParseLabelArgs(args []string) (map[string]string, []string, error) {
	set := map[string]string{}
	var remove []string
	for _, arg := range args {
		if key, ok := strings.CutSuffix(arg, "-"); ok && !strings.Contains(arg, "=") {
			full, err := policy.UserLabelKey(key)
			if err != nil {
				return nil, nil, err
			}
			remove = append(remove, full)
			continue
		}
		key, value, ok := strings.Cut(arg, "=")
		if !ok {
			return nil, nil, fmt.Errorf("invalid label argument %q: expected KEY=VALUE or KEY-", arg)
		}
		full, err := policy.UserLabelKey(key)
		if err != nil {
			return nil, nil, err
		}
		if err := policy.ValidateLabel(full, value); err != nil {
			return nil, nil, err
		}
		if _, dup := set[full]; dup {
			return nil, nil, fmt.Errorf("label %q is given twice", full)
		}
		set[full] = value
	}
	for _, k := range remove {
		if _, both := set[k]; both {
			return nil, nil, fmt.Errorf("label %q is both set and removed", k)
		}
	}
	return set, remove, nil
}

// Run checks the change against the membership rules and applies it.
func (o *LabelNodeOptions) Run(ctx context.Context) error {
	var moved *membershipChange
	node, changed, err := kit.UpdateNode(ctx, o.clients, o.Node, o.DryRun, func(n *corev1.Node) error {
		if err := o.checkOverwrite(n); err != nil {
			return err
		}
		change, err := o.membership(ctx, n)
		if err != nil {
			return err
		}
		moved = change
		o.apply(n, change)
		return nil
	})
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(o.Out, "node/%s not labeled%s\n", o.Node, o.Suffix())
		return nil
	}
	if moved != nil {
		moved.record(ctx, &o.Mutation, node, "kubectl litepool label")
	}
	fmt.Fprintf(o.Out, "node/%s labeled%s\n", o.Node, o.Suffix())
	return nil
}

func (o *LabelNodeOptions) checkOverwrite(n *corev1.Node) error {
	if o.Overwrite {
		return nil
	}
	for _, k := range kit.SortedKeys(o.Set) {
		if have, ok := n.Labels[k]; ok && have != o.Set[k] {
			return fmt.Errorf("'%s' already has a value (%s), and --overwrite is false; nothing was changed", k, have)
		}
	}
	return nil
}

func (o *LabelNodeOptions) apply(n *corev1.Node, change *membershipChange) {
	if change != nil && change.from != nil {
		policy.ApplyLeave(change.from, n)
	}
	for _, k := range o.Remove {
		delete(n.Labels, k)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range o.Set {
		n.Labels[k] = v
	}
	if change != nil && change.to != nil {
		policy.ApplyJoin(change.to, n)
	}
}

// membershipChange is a node moving between pools (nil pools: "default").
type membershipChange struct {
	fromName, toName string
	from, to         *v1alpha1.Pool
}

// membership works out whether the labels move the node between pools and, if so,
// checks N3 on the pool it leaves and N2 on the pool it joins, and N2 when the node's
// gpu-type changes inside its pool.
func (o *LabelNodeOptions) membership(ctx context.Context, n *corev1.Node) (*membershipChange, error) {
	after := n.DeepCopy()
	for _, k := range o.Remove {
		delete(after.Labels, k)
	}
	if after.Labels == nil {
		after.Labels = map[string]string{}
	}
	for k, v := range o.Set {
		after.Labels[k] = v
	}
	fromName, toName := policy.PoolOf(n), policy.PoolOf(after)
	to, err := kit.NewCatalog(ctx, o.clients).Object(toName)
	if err != nil {
		return nil, err
	}
	if to != nil {
		if err := policy.CheckJoin(to, after); err != nil {
			return nil, err
		}
	}
	if fromName == toName {
		return nil, nil
	}
	change := &membershipChange{fromName: fromName, toName: toName, to: to}
	if fromName != policy.DefaultPool {
		from, err := kit.NewCatalog(ctx, o.clients).Object(fromName)
		if err != nil {
			return nil, err
		}
		change.from = from
		if err := checkLeave(ctx, o.clients, from, fromName, n.Name); err != nil {
			return nil, err
		}
	}
	if toName != policy.DefaultPool && change.to == nil {
		change.to = kit.SynthesizedMember(toName)
	}
	return change, nil
}

func (m *membershipChange) record(ctx context.Context, mu *kit.Mutation, node *corev1.Node, by string) {
	if m.fromName != policy.DefaultPool {
		ref := events.NodeRef(node).About(events.PoolRef(m.fromName))
		if mu.Recorder != nil {
			_ = mu.Recorder.Normal(ctx, ref, "RemovedFromPool", "node %s removed from pool %s (%s)", node.Name, m.fromName, by)
		}
	}
	if m.toName != policy.DefaultPool {
		ref := events.NodeRef(node).About(events.PoolRef(m.toName))
		if mu.Recorder != nil {
			_ = mu.Recorder.Normal(ctx, ref, "AddedToPool", "node %s added to pool %s (%s)", node.Name, m.toName, by)
		}
	}
}

// checkLeave is N3 for one node leaving pool (nil: a pool with no object): its workload
// pods and the pool's floor.
func checkLeave(ctx context.Context, c *kit.Clients, pool *v1alpha1.Pool, poolName, node string) error {
	pods, err := kit.WorkloadPodsOn(ctx, c, map[string]bool{node: true})
	if err != nil {
		return err
	}
	members, err := c.Kube.CoreV1().Nodes().List(ctx, kit.ListBySelector(kit.PoolSelector(poolName)))
	if err != nil {
		return err
	}
	return policy.CheckLeave(pool, poolName, node, pods[node], len(members.Items)-1)
}
