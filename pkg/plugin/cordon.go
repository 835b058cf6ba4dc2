package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/nodeops"
)

var (
	_ = register(NewCmdCordon)
	_ = register(NewCmdUncordon)
)

// CordonOptions is `cordon` and `uncordon`.
type CordonOptions struct {
	Mutation
	Names    []string
	Uncordon bool

	clients *clients
	genericiooptions.IOStreams
}

// NewCmdCordon is `kubectl litepool cordon NODE...`.
func NewCmdCordon(f cmdutil.Factory, streams genericiooptions.IOStreams) *cobra.Command {
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
func NewCmdUncordon(f cmdutil.Factory, streams genericiooptions.IOStreams) *cobra.Command {
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

func newCordonCommand(f cmdutil.Factory, streams genericiooptions.IOStreams, uncordon bool, cmd *cobra.Command) *cobra.Command {
	o := &CordonOptions{IOStreams: streams, Uncordon: uncordon}
	cmd.Args = cobra.MinimumNArgs(1)
	cmd.ValidArgsFunction = completeNodeNames(f)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.Names = args
		c, err := newClients(f)
		if err != nil {
			return err
		}
		o.clients = c
		if err := o.Mutation.complete(cmd, c); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
	addDryRunFlag(cmd)
	return cmd
}

// Run cordons or uncordons each node; it stops at the first node that does not exist.
func (o *CordonOptions) Run(ctx context.Context) error {
	for _, name := range o.Names {
		before, err := o.clients.kube.CoreV1().Nodes().Get(ctx, name, getOpts)
		if err != nil {
			return err
		}
		var node *corev1.Node
		if o.Uncordon {
			node, err = nodeops.ForceUncordon(ctx, o.clients.kube, name, o.DryRun)
		} else {
			node, err = nodeops.OperatorCordon(ctx, o.clients.kube, name, o.DryRun)
		}
		if err != nil {
			return err
		}
		verb := "cordoned"
		if o.Uncordon {
			verb = "uncordoned"
		}
		if before.Spec.Unschedulable == !o.Uncordon {
			fmt.Fprintf(o.Out, "node/%s already %s%s\n", name, verb, o.suffix())
			continue
		}
		reason := map[bool]string{false: "Cordoned", true: "Uncordoned"}[o.Uncordon]
		o.nodeEvent(ctx, node, false, reason, "node %s %s by kubectl litepool", name, verb)
		fmt.Fprintf(o.Out, "node/%s %s%s\n", name, verb, o.suffix())
	}
	return nil
}
