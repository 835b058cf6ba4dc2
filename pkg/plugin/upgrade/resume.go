package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// UpgradeResumeOptions is `upgrade resume`.
type UpgradeResumeOptions struct {
	changeOptions
	RetryFailed    bool
	MaxUnavailable string
}

// NewCmdUpgradeResume is `kubectl litepool upgrade resume`.
func NewCmdUpgradeResume(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeResumeOptions{changeOptions: changeOptions{Mutation: kit.NewMutation(), IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "resume (NAME | --pool POOL | --node NODE) [--retry-failed] [--max-unavailable N]",
		Short: "Continue a paused, stopped or undriven driver rollout",
		Long: templates.LongDesc(`
			Continue a driver rollout: unpause it (spec.paused=false), and with
			--retry-failed re-mark its failed nodes upgrade-required once (it raises
			spec.retryFailed; their installer runs afresh). --max-unavailable changes
			the rollout's budget (spec.maxUnavailable), for example when nodes
			cordoned by someone else take all of it. Nodes already done are never
			touched again; nodes in the middle of a step repeat that step.

			Then the command follows the rollout as "upgrade driver" does, and drives
			it itself when no controller acts on it.`),
		Example: templates.Examples(`
			# Continue a pool's rollout
			kubectl litepool upgrade resume --pool train-snt9b

			# Retry the failed node and continue
			kubectl litepool upgrade resume --pool train-snt9b --retry-failed

			# Continue with a larger budget
			kubectl litepool upgrade resume --pool train-snt9b --max-unavailable 2

			# What would resume do?
			kubectl litepool upgrade resume --pool train-snt9b --retry-failed --dry-run=client`),
	}
	o.addFlags(cmd, f)
	cmd.Flags().BoolVar(&o.RetryFailed, "retry-failed", false, "Re-mark failed nodes upgrade-required and retry them")
	cmd.Flags().StringVar(&o.MaxUnavailable, "max-unavailable", "", "Change the rollout's max-unavailable (a count or a percentage)")
	return kit.Bind(cmd, f, o)
}

// Validate checks --max-unavailable and -o.
func (o *UpgradeResumeOptions) Validate() error {
	if o.MaxUnavailable != "" {
		if _, err := policy.ParseMaxUnavailable(o.MaxUnavailable); err != nil {
			return err
		}
	}
	return o.Mutation.Validate()
}

// Run resumes.
func (o *UpgradeResumeOptions) Run(ctx context.Context) error {
	ro, err := o.Scope.newest(ctx, o.rollouts)
	if err != nil {
		return err
	}
	if ro == nil || upgrade.Final(ro) {
		o.Say(o.IOStreams, "nothing to resume in %s: no unfinished driver rollout\n", o.Scope.String())
		return nil
	}
	var failed []string
	for _, n := range ro.Status.Nodes {
		if n.State == string(policy.UpgradeFailed) {
			failed = append(failed, fmt.Sprintf("%s (%s)", n.Name, n.Message))
		}
	}
	if len(failed) > 0 && !o.RetryFailed {
		return policy.Violationf("U4", "driverrollout %s stopped on failed node(s) %s: fix them, then resume with --retry-failed", ro.Name, strings.Join(failed, "; "))
	}
	if o.MaxUnavailable != "" && ro.Spec.Pool == "" {
		return fmt.Errorf("--max-unavailable applies to a pool rollout; driverrollout %s upgrades named nodes", ro.Name)
	}
	if o.MaxUnavailable != "" && ro.Spec.MaxUnavailableDomains != nil {
		return fmt.Errorf("--max-unavailable paces a rollout node by node; driverrollout %s rolls by domain (spec.maxUnavailableDomains %d, fixed): abort it and start another to change its pace", ro.Name, *ro.Spec.MaxUnavailableDomains)
	}
	err = o.patch(ctx, ro, func(ro *v1alpha1.DriverRollout) {
		ro.Spec.Paused = false
		if len(failed) > 0 {
			ro.Spec.RetryFailed = max(ro.Spec.RetryFailed, ro.Status.RetriedFailed) + 1
		}
		if o.MaxUnavailable != "" {
			v, _ := policy.ParseMaxUnavailable(o.MaxUnavailable)
			ro.Spec.MaxUnavailable = &v
		}
	})
	if err != nil {
		return err
	}
	for _, n := range ro.Status.Nodes {
		if n.State == string(policy.UpgradeFailed) {
			o.Say(o.IOStreams, "%snode/%s: failed → upgrade-required (retry)%s\n", wouldOf(o.DryRun), n.Name, o.Suffix())
		}
	}
	if o.DryRun != cmdutil.DryRunNone {
		return o.printPlan(ctx, ro)
	}
	o.Say(o.IOStreams, "driverrollout/%s resumed\n", ro.Name)
	return o.follow(ctx, ro.Name)
}

func wouldOf(d cmdutil.DryRunStrategy) string {
	if d != cmdutil.DryRunNone {
		return "would retry: "
	}
	return ""
}

// printPlan shows the waves a resumed rollout would run.
func (o *UpgradeResumeOptions) printPlan(ctx context.Context, ro *v1alpha1.DriverRollout) error {
	shown := ro.DeepCopy()
	for i := range shown.Status.Nodes {
		if shown.Status.Nodes[i].State == string(policy.UpgradeFailed) {
			shown.Status.Nodes[i].State = string(policy.UpgradeRequired)
		}
	}
	var pool *v1alpha1.Pool
	if ro.Spec.Pool != "" {
		if p, err := o.clients.Pools.Get(ctx, ro.Spec.Pool); err == nil {
			pool = p
		}
	}
	waves, waiting, maxU, err := upgrade.Predict(ctx, o.clients.Kube, shown, pool)
	if err != nil {
		return err
	}
	o.Say(o.IOStreams, "would resume driverrollout %s (→ %s), max unavailable %d:\n", ro.Name, ro.Spec.Version, maxU)
	for i, w := range waves {
		var parts []string
		for _, n := range w {
			if j := slices.IndexFunc(ro.Status.Nodes, func(s v1alpha1.DriverRolloutNode) bool { return s.Name == n }); j >= 0 {
				if s := policy.UpgradeState(ro.Status.Nodes[j].State); policy.UpgradeStarted(s) {
					n += " (from " + string(s) + ")"
				}
			}
			parts = append(parts, n)
		}
		o.Say(o.IOStreams, "  wave %d: %s\n", i+1, strings.Join(parts, ", "))
	}
	if len(waiting) > 0 {
		o.Say(o.IOStreams, "  not started: %s\n", strings.Join(waiting, ", "))
	}
	o.Say(o.IOStreams, "(dry run: nothing changed)\n")
	return nil
}
