// Package label is `kubectl litepool label node`.
package label

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

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

// NewLabelNodeOptions returns the options of label node.
func NewLabelNodeOptions(streams genericiooptions.IOStreams) *LabelNodeOptions {
	return &LabelNodeOptions{Mutation: kit.NewMutation(), IOStreams: streams}
}

// NewCmdLabelNode is `kubectl litepool label node NODE KEY=VALUE... [KEY-...] [--overwrite]`.
func NewCmdLabelNode(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewLabelNodeOptions(streams)
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
	}
	cmd.Flags().BoolVar(&o.Overwrite, "overwrite", false, "Allow labels to be overwritten; otherwise a label with a different value is an error")
	o.Mutation.AddFlags(cmd, false)
	return kit.Bind(cmd, f, o)
}

// Complete parses KEY=VALUE and KEY- arguments, checking every key and value before
// the clients are built, and then builds them.
func (o *LabelNodeOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Node = args[0]
	if o.Set, o.Remove, err = ParseLabelArgs(args[1:]); err != nil {
		return err
	}
	o.clients, err = o.CompleteClients(f, cmd)
	return err
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
	node, changed, err := nodeops.ModifyNode(ctx, o.clients.Kube, o.Node, o.DryRun, func(n *corev1.Node) error {
		if err := o.checkOverwrite(n); err != nil {
			return err
		}
		change, err := o.change(ctx, n)
		if err != nil {
			return err
		}
		moved = change
		return nil
	})
	if err != nil {
		return err
	}
	if !changed {
		return o.Print(o.Out, node, "not labeled")
	}
	if moved != nil {
		moved.record(ctx, &o.Mutation, node, "kubectl litepool label")
	}
	return o.Print(o.Out, node, "labeled")
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

// membershipChange is a node moving between pools ("default": none).
type membershipChange struct {
	fromName, toName string
}

// change applies the labels to n, with what leaving and joining a pool do (labels and
// taints of the pool and its node pool), and checks the result with the webhook's own
// node rules (policy.AdmitNode: N2 when the node joins a pool or changes its
// accelerator model inside one, N3 when it leaves one). It returns the move between
// pools, nil when the node stays in its pool.
func (o *LabelNodeOptions) change(ctx context.Context, n *corev1.Node) (*membershipChange, error) {
	before := n.DeepCopy()
	labelled := n.DeepCopy()
	o.setLabels(labelled)
	cat := kit.NewCatalog(ctx, o.clients)
	move := &membershipChange{fromName: policy.PoolOf(before), toName: policy.PoolOf(labelled)}
	if move.fromName == move.toName {
		move = nil
		o.setLabels(n)
	} else if err := move.apply(o, cat, n); err != nil {
		return nil, err
	}
	if err := admit(n, before, cat); err != nil {
		return nil, err
	}
	return move, nil
}

// admit is the webhook's node admission over the plugin's catalog. Two differences,
// both the plugin's behaviour before it called AdmitNode: the node is judged without
// its runwhere.ai/force annotation (a relabel through the plugin never uses the N3
// override: that is for delete pool --force and for the audited annotation written by
// hand), and only the first violation is returned (N2 before N3), as the plugin's own
// checks did.
func admit(after, before *corev1.Node, cat *kit.Catalog) error {
	_, err := policy.AdmitNode(withoutForce(after), withoutForce(before), cat)
	if cerr := cat.Err(); cerr != nil {
		return cerr
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 0 {
		return joined.Unwrap()[0]
	}
	return err
}

func withoutForce(n *corev1.Node) *corev1.Node {
	if _, ok := n.Annotations[policy.AnnotationForce]; !ok {
		return n
	}
	n = n.DeepCopy()
	delete(n.Annotations, policy.AnnotationForce)
	return n
}

func (o *LabelNodeOptions) setLabels(n *corev1.Node) {
	for _, k := range o.Remove {
		delete(n.Labels, k)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range o.Set {
		n.Labels[k] = v
	}
}

// apply changes n as the labels and the move between pools do: the old pool's labels
// and taints go (a pool with no object: only what the labels say), the labels are set,
// the new pool's label and taint come.
func (m *membershipChange) apply(o *LabelNodeOptions, cat *kit.Catalog, n *corev1.Node) error {
	from, err := cat.Object(m.fromName)
	if err != nil {
		return err
	}
	to, err := cat.Object(m.toName)
	if err != nil {
		return err
	}
	if m.fromName != policy.DefaultPool {
		policy.ApplyLeave(from, n) // from is nil for a pool of labels
	}
	o.setLabels(n)
	if m.toName != policy.DefaultPool {
		if to == nil {
			to = kit.SynthesizedMember(m.toName)
		}
		policy.ApplyJoin(to, n)
	}
	return nil
}

func (m *membershipChange) record(ctx context.Context, mu *kit.Mutation, node *corev1.Node, by string) {
	if m.fromName != policy.DefaultPool {
		ref := events.NodeRef(node).About(events.PoolRef(m.fromName))
		mu.Event(ctx, &ref, false, "RemovedFromPool", "node %s removed from pool %s (%s)", node.Name, m.fromName, by)
	}
	if m.toName != policy.DefaultPool {
		ref := events.NodeRef(node).About(events.PoolRef(m.toName))
		mu.Event(ctx, &ref, false, "AddedToPool", "node %s added to pool %s (%s)", node.Name, m.toName, by)
	}
}
