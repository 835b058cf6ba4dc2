// Package cordon is `kubectl litepool cordon` and `uncordon`.
package cordon

import (
	"context"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// CordonOptions is `cordon` and `uncordon`.
type CordonOptions struct {
	kit.Mutation
	Names    []string
	Uncordon bool

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCordonOptions returns the options of cordon (uncordon: true for uncordon).
func NewCordonOptions(streams genericiooptions.IOStreams, uncordon bool) *CordonOptions {
	return &CordonOptions{Mutation: kit.NewMutation(), IOStreams: streams, Uncordon: uncordon}
}

// NewCmdCordon is `kubectl litepool cordon NODE...`.
func NewCmdCordon(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCordonCommand(f, streams, false, &cobra.Command{
		Use:   "cordon NODE...",
		Short: "Mark nodes unschedulable",
		Long: templates.LongDesc(`
			Mark nodes unschedulable, as kubectl cordon does, and record an event on
			each. The node keeps its pods and its pool; its status becomes Cordoned.

			A cordon given here is the operator's: a driver upgrade or scale-down that
			is under way on the node will leave it cordoned when it finishes.`),
		Example: templates.Examples(`
			kubectl litepool cordon a100-node-3
			kubectl litepool cordon a100-node-3 a100-node-4 --dry-run=server`),
	})
}

// NewCmdUncordon is `kubectl litepool uncordon NODE...`.
func NewCmdUncordon(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCordonCommand(f, streams, true, &cobra.Command{
		Use:   "uncordon NODE...",
		Short: "Mark nodes schedulable again",
		Long: templates.LongDesc(`
			Mark nodes schedulable again, as kubectl uncordon does, and record an
			event on each. It also forgets what litepool remembered about the node's
			earlier cordon (runwhere.ai/was-cordoned).`),
		Example: templates.Examples(`
			kubectl litepool uncordon a100-node-3`),
	})
}

func newCordonCommand(f kit.Factory, streams genericiooptions.IOStreams, uncordon bool, cmd *cobra.Command) *cobra.Command {
	o := NewCordonOptions(streams, uncordon)
	cmd.Args = cobra.MinimumNArgs(1)
	cmd.ValidArgsFunction = kit.CompleteNodeNames(f)
	o.Mutation.AddFlags(cmd, false)
	return kit.Bind(cmd, f, o)
}

// Complete reads the node names and builds the clients.
func (o *CordonOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Names = args
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Run cordons or uncordons each node; it stops at the first node that does not exist.
func (o *CordonOptions) Run(ctx context.Context) error {
	for _, name := range o.Names {
		before, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var node *corev1.Node
		if o.Uncordon {
			node, err = nodeops.ForceUncordon(ctx, o.clients.Kube, name, o.DryRun)
		} else {
			node, err = nodeops.OperatorCordon(ctx, o.clients.Kube, name, o.DryRun)
		}
		if err != nil {
			return err
		}
		verb := "cordoned"
		if o.Uncordon {
			verb = "uncordoned"
		}
		if before.Spec.Unschedulable == !o.Uncordon {
			if err := o.Print(o.Out, node, "already "+verb); err != nil {
				return err
			}
			continue
		}
		reason := map[bool]string{false: "Cordoned", true: "Uncordoned"}[o.Uncordon]
		o.NodeEvent(ctx, node, false, reason, "node %s %s by kubectl litepool", name, verb)
		if err := o.Print(o.Out, node, verb); err != nil {
			return err
		}
	}
	return nil
}
