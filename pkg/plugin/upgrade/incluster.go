package upgrade

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// rolloutFollowInterval is how often --wait reads the rollout's nodes.
var rolloutFollowInterval = 2 * time.Second

// handOver leaves a marked rollout to the in-cluster controller and, with --wait,
// follows it until it completes or stops.
func (o *UpgradeDriverOptions) handOver(ctx context.Context, run policy.UpgradeRun) error {
	scope := "--node " + o.Node
	if o.Pool != "" {
		scope = "--pool " + o.Pool
	}
	o.Say(o.IOStreams, "rollout %s: handed to the controller in litepool-webhook; follow it with `kubectl litepool upgrade status %s`\n", run.ID, scope)
	if !o.Wait {
		return nil
	}
	return o.follow(ctx, run)
}

// follow prints the rollout's progress whenever it changes, until it is complete
// (nil) or stopped on a failure (an error). Interrupting it leaves the rollout running.
func (o *UpgradeDriverOptions) follow(ctx context.Context, run policy.UpgradeRun) error {
	last := ""
	var result error
	err := wait.PollUntilContextCancel(ctx, rolloutFollowInterval, true, func(ctx context.Context) (bool, error) {
		nodes, err := o.rolloutNodes(ctx, run)
		if err != nil {
			return false, err
		}
		p, ok := rolloutProgress(nodes, run.ID)
		if !ok {
			return false, fmt.Errorf("rollout %s: no node carries it any more (aborted?)", run.ID)
		}
		line := fmt.Sprintf("rollout %s: %s: %d/%d done, %d in progress, %d pending, %d failed",
			run.ID, p.Phase, p.Done, p.Total, p.InProgress, p.Pending, p.Failed)
		if line != last {
			o.Say(o.IOStreams, "%s\n", line)
			last = line
		}
		switch {
		case p.Failed > 0:
			result = fmt.Errorf("rollout %s stopped on failure: see `kubectl litepool upgrade status`; fix the node, then `kubectl litepool upgrade resume --retry-failed`", run.ID)
			return true, nil
		case p.Done == p.Total:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped following rollout %s; it goes on in the cluster: %w", run.ID, err)
		}
		return err
	}
	return result
}

func (o *UpgradeDriverOptions) rolloutNodes(ctx context.Context, run policy.UpgradeRun) ([]corev1.Node, error) {
	if run.Pool != "" {
		list, err := o.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: run.Pool}.String()})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	n, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, o.Node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return []corev1.Node{*n}, nil
}

// rolloutProgress is the rollout's line of `upgrade status`.
func rolloutProgress(nodes []corev1.Node, id string) (UpgradeRolloutStatus, bool) {
	for _, p := range upgradeStatusOf(nodes).Rollouts {
		if p.ID == id {
			return p, true
		}
	}
	return UpgradeRolloutStatus{}, false
}

// watch prints each rollout's line whenever it changes until none is in progress (or
// the user interrupts; the rollouts go on).
func (o *UpgradeStatusOptions) watch(ctx context.Context, st UpgradeStatus) error {
	last := map[string]string{}
	for _, p := range st.Rollouts {
		last[p.ID] = rolloutLine(p)
	}
	return wait.PollUntilContextCancel(ctx, rolloutFollowInterval, false, func(ctx context.Context) (bool, error) {
		nodes, err := o.Scope.nodes(ctx, o.clients)
		if err != nil {
			return false, err
		}
		active := false
		for _, p := range upgradeStatusOf(nodes).Rollouts {
			if line := rolloutLine(p); line != last[p.ID] {
				fmt.Fprintln(o.Out, line)
				last[p.ID] = line
			}
			active = active || p.Phase == "in progress"
		}
		return !active, nil
	})
}
