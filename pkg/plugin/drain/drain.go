// Package drain is `kubectl litepool drain`.
package drain

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// DrainOptions is `drain`.
type DrainOptions struct {
	kit.Mutation
	Names []string
	Drain nodeops.DrainOptions

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewDrainOptions returns the options of drain.
func NewDrainOptions(streams genericiooptions.IOStreams) *DrainOptions {
	return &DrainOptions{Mutation: kit.NewMutation(), IOStreams: streams}
}

// NewCmdDrain is `kubectl litepool drain NODE...`.
func NewCmdDrain(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewDrainOptions(streams)
	cmd := &cobra.Command{
		Use:   "drain NODE...",
		Short: "Cordon nodes and evict their pods, respecting PodDisruptionBudgets",
		Long: templates.LongDesc(`
			Cordon nodes and evict their pods, exactly as kubectl drain does (it is
			built on kubectl's drain library): evictions respect PodDisruptionBudgets
			and are retried until --timeout; DaemonSet pods need --ignore-daemonsets;
			pods with emptyDir data need --delete-emptydir-data; pods no controller
			manages need --force (they are deleted and not recreated).

			While a drain runs the node shows as Draining. A drain a PodDisruptionBudget
			blocks stops at --timeout and names the pods that could not be evicted; the
			node stays cordoned, as with kubectl. A drain that cannot start (pods
			that need --force, --ignore-daemonsets or --delete-emptydir-data) is
			refused before the node is cordoned. Events are recorded on the node.`),
		Example: templates.Examples(`
			# Drain a node, leaving DaemonSet pods in place
			kubectl litepool drain a100-node-3 --ignore-daemonsets

			# Give up after two minutes if a PodDisruptionBudget blocks an eviction
			kubectl litepool drain a100-node-3 --ignore-daemonsets --timeout=2m

			# Show what would be evicted
			kubectl litepool drain a100-node-3 --ignore-daemonsets --dry-run=server`),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: kit.CompleteNodeNames(f),
	}
	kit.AddDrainFlags(cmd, &o.Drain)
	o.Mutation.AddFlags(cmd, false)
	return kit.Bind(cmd, f, o)
}

// Complete reads the node names and builds the clients.
func (o *DrainOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Names = args
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Run cordons and drains each node in turn; it stops at the first failure. A drain
// that is interrupted (SIGINT/SIGTERM) puts its node back: uncordoned if this command
// cordoned it and no litepool operation holds it. Under -o the eviction progress goes
// to stderr and stdout carries only the node as the drain left it.
func (o *DrainOptions) Run(ctx context.Context) error {
	d := o.Drain
	d.DryRun, d.Out, d.ErrOut = o.DryRun, o.Out, o.ErrOut
	if o.Output() != "" {
		d.Out = o.ErrOut
	}
	defer interrupt.InFlight.Clear()
	for _, name := range o.Names {
		node, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := nodeops.CheckDrain(ctx, o.clients.Kube, name, d); err != nil {
			return err
		}
		cordoned := false
		if !node.Spec.Unschedulable {
			if node, err = nodeops.OperatorCordon(ctx, o.clients.Kube, name, o.DryRun); err != nil {
				return err
			}
			cordoned = true
			if o.Output() == "" { // under -o the node is printed once, drained
				if err := o.Print(o.Out, node, "cordoned"); err != nil {
					return err
				}
			}
		}
		interrupt.InFlight.Set(func() string { return drainLeftovers(name, cordoned) })
		o.NodeEvent(ctx, node, false, "Draining", "draining node %s (kubectl litepool drain)", name)
		if err := nodeops.Drain(ctx, o.clients.Kube, name, d); err != nil {
			if ctx.Err() != nil {
				return o.putBack(ctx, name, cordoned, err)
			}
			o.NodeEvent(ctx, node, true, "DrainFailed", "%v", err)
			return err
		}
		o.NodeEvent(ctx, node, false, "Drained", "node %s drained", name)
		if err := o.Print(o.Out, node, "drained"); err != nil {
			return err
		}
	}
	return nil
}

// putBack undoes an interrupted drain's cordon: the node is uncordoned when this
// command cordoned it and no litepool operation (scale-down, upgrade) holds it.
func (o *DrainOptions) putBack(ctx context.Context, name string, cordoned bool, cause error) error {
	why := interrupt.StoppedBecause(ctx, cause)
	ctx, cancel := interrupt.RollbackContext(ctx)
	defer cancel()
	if !cordoned {
		return fmt.Errorf("drain of node %q %s; the node stays cordoned, as it was before", name, why)
	}
	var heldBy []string
	node, _, err := nodeops.ModifyNode(ctx, o.clients.Kube, name, o.DryRun, func(n *corev1.Node) error {
		if heldBy = policy.HeldBy(n); len(heldBy) == 0 {
			n.Spec.Unschedulable = false
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drain of node %q %s; uncordoning it failed: %v; run kubectl uncordon %s", name, why, err, name)
	}
	if len(heldBy) > 0 {
		return fmt.Errorf("drain of node %q %s; the node stays cordoned: litepool's %s holds it", name, why, strings.Join(heldBy, ", "))
	}
	o.NodeEvent(ctx, node, false, "DrainStopped", "drain of node %s interrupted; node uncordoned", name)
	if err := o.Print(o.Out, node, "uncordoned"); err != nil {
		return err
	}
	return fmt.Errorf("drain of node %q %s; the node was put back (uncordoned); evicted pods are not brought back, their controllers recreate them", name, why)
}

// drainLeftovers is what an interrupted drain leaves when the put-back is skipped.
func drainLeftovers(name string, cordoned bool) string {
	msg := fmt.Sprintf("drain of node %s stopped half-way: the node is cordoned and may still carry %s.\nResume it:\n  %s\nOr put it back:\n  kubectl annotate node %s %s-",
		name, policy.AnnotationDraining, interrupt.CommandLine(), name, policy.AnnotationDraining)
	if cordoned {
		msg += "\n  kubectl uncordon " + name
	}
	return msg
}
