package upgrade

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// UpgradeAbortOptions is `upgrade abort`.
type UpgradeAbortOptions struct{ changeOptions }

// NewCmdUpgradeAbort is `kubectl litepool upgrade abort`.
func NewCmdUpgradeAbort(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeAbortOptions{changeOptions{Mutation: kit.NewMutation(), IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "abort (NAME | --pool POOL | --node NODE)",
		Short: "Stop a driver rollout: nodes not yet started leave it",
		Long: templates.LongDesc(`
			Stop a driver rollout (spec.abort=true; it cannot be undone). Nodes still
			waiting for their wave leave the rollout (state aborted; their upgrade
			annotations are removed). Nodes in the middle of their upgrade are never
			left half-done: they finish. Failed nodes stay failed and cordoned for an
			operator to look at. The command follows the rollout until it is aborted.`),
		Example: templates.Examples(`
			# Stop a pool's rollout after the nodes in flight
			kubectl litepool upgrade abort --pool train-snt9b

			# Request it and return
			kubectl litepool upgrade abort --pool train-snt9b --wait=false`),
	}
	o.addFlags(cmd, f)
	return kit.Bind(cmd, f, o)
}

// Run aborts.
func (o *UpgradeAbortOptions) Run(ctx context.Context) error {
	ro, err := o.Scope.newest(ctx, o.rollouts)
	if err != nil {
		return err
	}
	if ro == nil || upgrade.Final(ro) {
		o.Say(o.IOStreams, "no unfinished driver rollout in %s\n", o.Scope.String())
		return nil
	}
	if err := o.patch(ctx, ro, func(ro *v1alpha1.DriverRollout) { ro.Spec.Abort = true }); err != nil {
		return err
	}
	var leave, inflight, failed []string
	for _, n := range ro.Status.Nodes {
		switch s := policy.UpgradeState(n.State); {
		case s == policy.UpgradeRequired:
			leave = append(leave, n.Name)
		case s == policy.UpgradeFailed:
			failed = append(failed, n.Name)
		case policy.UpgradeStarted(s):
			inflight = append(inflight, n.Name+" ("+string(s)+")")
		}
	}
	o.Say(o.IOStreams, "driverrollout/%s aborted%s: %d node(s) leave the rollout: %s\n", ro.Name, o.Suffix(), len(leave), upgradeOrNone(leave))
	if len(inflight) > 0 {
		o.Say(o.IOStreams, "in progress, finishing: %s\n", strings.Join(inflight, ", "))
	}
	if len(failed) > 0 {
		o.Say(o.IOStreams, "failed, left cordoned for inspection: %s\n", strings.Join(failed, ", "))
	}
	return o.follow(ctx, ro.Name)
}
