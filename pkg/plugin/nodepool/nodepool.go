// Package nodepool is `kubectl litepool nodepool add|remove|apply`.
package nodepool

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// NewCmdNodePool is `kubectl litepool nodepool add|remove|apply`.
func NewCmdNodePool(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "nodepool",
		Aliases: []string{"np"},
		Short:   "Add nodes to a node pool, remove them, apply its labels and taints",
		Long: templates.LongDesc(`
			Manage the members of node pools: groups of same-spec nodes inside a pool.
			A node pool is declared in its pool's spec.nodePools, with the labels and
			taints its members carry (kubectl litepool edit pool P, or create -f);
			these commands put nodes of the pool into it, take them out, and apply its
			labels and taints to all of its members. List node pools with
			kubectl litepool get nodepools.`),
		Example: templates.Examples(`
			kubectl litepool nodepool add a100-np1 a100-node-3 --pool train-a100
			kubectl litepool nodepool remove a100-np1 a100-node-3 --pool train-a100
			kubectl litepool nodepool apply a100-np1 --pool train-a100`),
	}
	cmd.AddCommand(NewCmdNodePoolAdd(f, streams), NewCmdNodePoolRemove(f, streams), NewCmdNodePoolApply(f, streams))
	return cmd
}

// NodePoolOptions is `nodepool add|remove|apply`.
type NodePoolOptions struct {
	kit.Mutation
	Verb     string
	Pool     string
	NodePool string
	Nodes    []string

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewNodePoolOptions returns the options of nodepool VERB (add, remove or apply).
func NewNodePoolOptions(streams genericiooptions.IOStreams, verb string) *NodePoolOptions {
	return &NodePoolOptions{Mutation: kit.NewMutation(), IOStreams: streams, Verb: verb}
}

// NewCmdNodePoolAdd is `kubectl litepool nodepool add NODEPOOL NODE... --pool POOL`.
func NewCmdNodePoolAdd(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newNodePoolCommand(f, streams, "add", &cobra.Command{
		Use:   "add NODEPOOL NODE... --pool POOL",
		Short: "Put nodes of a pool into one of its node pools",
		Long: templates.LongDesc(`
			Put nodes into a node pool: each gets the label runwhere.ai/node-pool and
			the node pool's labels and taints. The nodes must already belong to the
			pool (kubectl litepool scale POOL --add NODE brings them in) and to no
			other node pool, and the node pool must be declared in the pool's
			spec.nodePools. Everything is checked before anything changes.`),
		Example: templates.Examples(`
			kubectl litepool nodepool add a100-np1 a100-node-3 --pool train-a100`),
		Args: cobra.MinimumNArgs(2),
	})
}

// NewCmdNodePoolRemove is `kubectl litepool nodepool remove NODEPOOL NODE... --pool POOL`.
func NewCmdNodePoolRemove(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newNodePoolCommand(f, streams, "remove", &cobra.Command{
		Use:   "remove NODEPOOL NODE... --pool POOL",
		Short: "Take nodes out of a node pool; they stay in the pool",
		Long: templates.LongDesc(`
			Take nodes out of a node pool: they lose the label runwhere.ai/node-pool
			and the node pool's labels and taints, and stay in the pool.`),
		Example: templates.Examples(`
			kubectl litepool nodepool remove a100-np1 a100-node-3 --pool train-a100`),
		Args: cobra.MinimumNArgs(2),
	})
}

// NewCmdNodePoolApply is `kubectl litepool nodepool apply NODEPOOL --pool POOL`.
func NewCmdNodePoolApply(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newNodePoolCommand(f, streams, "apply", &cobra.Command{
		Use:   "apply NODEPOOL --pool POOL",
		Short: "Apply a node pool's labels and taints to all its members",
		Long: templates.LongDesc(`
			Apply a node pool's labels and taints, as declared in the pool's
			spec.nodePools, to every node of the node pool: after editing a node
			pool's labels or taints, this brings its members in line. Labels are
			checked first (N1).`),
		Example: templates.Examples(`
			kubectl litepool edit pool train-a100
			kubectl litepool nodepool apply a100-np1 --pool train-a100`),
		Args: cobra.ExactArgs(1),
	})
}

func newNodePoolCommand(f kit.Factory, streams genericiooptions.IOStreams, verb string, cmd *cobra.Command) *cobra.Command {
	o := NewNodePoolOptions(streams, verb)
	cmd.Flags().StringVar(&o.Pool, "pool", "", "The pool the node pool belongs to")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	o.Mutation.AddFlags(cmd, false)
	return kit.Bind(cmd, f, o)
}

// Complete reads the node pool and the nodes, and builds the clients.
func (o *NodePoolOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.NodePool, o.Nodes = args[0], args[1:]
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Validate wants --pool: node pool names are unique only inside a pool.
func (o *NodePoolOptions) Validate() error {
	if o.Pool == "" {
		return fmt.Errorf("--pool is required: node pool names are unique only inside a pool")
	}
	return o.Mutation.Validate()
}

// Run checks every node, then changes them.
func (o *NodePoolOptions) Run(ctx context.Context) error {
	pool, err := o.pool(ctx)
	if err != nil {
		return err
	}
	np := policy.FindNodePool(pool, o.NodePool)
	if np == nil && o.Verb != "remove" {
		return fmt.Errorf("node pool %q is not declared in pool %q (declared: %s): add it to spec.nodePools with kubectl litepool edit pool %s",
			o.NodePool, o.Pool, declaredNodePools(pool), o.Pool)
	}
	if np != nil && o.Verb != "remove" {
		if err := policy.ValidateNodePool(np); err != nil {
			return err
		}
	}
	if o.Verb == "apply" {
		list, err := o.clients.Kube.CoreV1().Nodes().List(ctx, kit.ListBySelector(kit.PoolSelector(o.Pool)+","+policy.LabelNodePool+"="+o.NodePool))
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			fmt.Fprintf(o.ErrOut, "node pool %q of pool %q has no nodes\n", o.NodePool, o.Pool)
			return nil
		}
		for _, n := range list.Items {
			o.Nodes = append(o.Nodes, n.Name)
		}
	}
	if err := o.check(ctx); err != nil {
		return err
	}
	for _, name := range o.Nodes {
		if err := o.change(ctx, pool, np, name); err != nil {
			return err
		}
	}
	return nil
}

func (o *NodePoolOptions) pool(ctx context.Context) (*v1alpha1.Pool, error) {
	cat := kit.NewCatalog(ctx, o.clients)
	pool, err := cat.Object(o.Pool)
	if err != nil {
		return nil, err
	}
	if pool != nil {
		return pool, nil
	}
	if o.Pool == policy.DefaultPool {
		return nil, fmt.Errorf("the default pool has no node pools: put the nodes into a pool first")
	}
	if o.Verb == "remove" { // a node pool made only of labels can still be emptied
		return kit.SynthesizedMember(o.Pool), nil
	}
	if members, err := cat.Members(o.Pool); err == nil && len(members) > 0 {
		return nil, fmt.Errorf("pool %q has no Pool object, so no node pools are declared: create one with kubectl litepool create -f", o.Pool)
	}
	return nil, kit.PoolNotFound(o.Pool)
}

func declaredNodePools(p *v1alpha1.Pool) string {
	var names []string
	for _, np := range p.Spec.NodePools {
		names = append(names, np.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// check is every node's precondition, all at once, before anything changes.
func (o *NodePoolOptions) check(ctx context.Context) error {
	var errs []error
	for _, name := range kit.Dedupe(o.Nodes) {
		n, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, o.checkNode(n))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nothing was changed:\n%w", err)
	}
	return nil
}

func (o *NodePoolOptions) checkNode(n *corev1.Node) error {
	if pool := policy.PoolOf(n); pool != o.Pool {
		return fmt.Errorf("node %q is in pool %q, not in pool %q: add it to the pool first (kubectl litepool scale %s --add %s)", n.Name, pool, o.Pool, o.Pool, n.Name)
	}
	have := n.Labels[policy.LabelNodePool]
	switch o.Verb {
	case "add":
		if have != "" && have != o.NodePool {
			return fmt.Errorf("node %q is in node pool %q: take it out first (kubectl litepool nodepool remove %s %s --pool %s)", n.Name, have, have, n.Name, o.Pool)
		}
	case "remove":
		if have != o.NodePool {
			return fmt.Errorf("node %q is not in node pool %q (its node pool: %s)", n.Name, o.NodePool, kit.None(have))
		}
	}
	return nil
}

func (o *NodePoolOptions) change(ctx context.Context, pool *v1alpha1.Pool, np *v1alpha1.NodePool, name string) error {
	node, changed, err := nodeops.ModifyNode(ctx, o.clients.Kube, name, o.DryRun, func(n *corev1.Node) error {
		if err := o.checkNode(n); err != nil {
			return err
		}
		if o.Verb == "remove" {
			if np == nil {
				np = &v1alpha1.NodePool{Name: o.NodePool}
			}
			policy.ApplyNodePoolLeave(np, n)
			return nil
		}
		policy.ApplyNodePool(np, n)
		// A member placed in a node pool also carries the model labels a join writes
		// (it may have joined before litepool wrote runwhere.ai/gpuType, or by hand).
		policy.ApplyGPUTypeLabels(pool.Spec.Accelerator.Type, n)
		return nil
	})
	if err != nil {
		return err
	}
	msg := map[string]string{"add": "added to node pool " + o.NodePool, "remove": "removed from node pool " + o.NodePool, "apply": "configured"}[o.Verb]
	if !changed {
		msg = "unchanged"
	} else {
		o.NodeEvent(ctx, node, false, "NodePool", "node %s %s (pool %s)", name, msg, pool.Name)
	}
	return o.Print(o.Out, node, msg)
}
