package stress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
)

// runRefused is a run the Pool does not take: another one is under way.
type runRefused struct{ err error }

func (r *runRefused) Error() string { return r.err.Error() }

// newRun records a new run on pool (in memory), unless a run recorded there is not
// finished.
func (o *StressRunOptions) newRun(pool *v1alpha1.Pool) (stress.Run, error) {
	if raw, ok := pool.Annotations[stress.AnnotationRun]; ok {
		if cur, err := stress.DecodeRun(raw); err == nil && !cur.Finished() {
			return stress.Run{}, &runRefused{fmt.Errorf("pool %s: stress run %s is %s in the cluster: wait until it ends (the pool's %s annotation shows it), or run the tests here with --in-cluster=false",
				o.Pool, cur.ID, strings.ToLower(cur.State), stress.AnnotationRun)}
		}
	}
	run := stress.Run{ID: o.clock.Now().UTC().Format("20060102-150405"), Image: o.Image, Command: o.Command, Tests: o.Tests, Namespace: o.namespace,
		Timeout: o.Timeout.String(), KeepPods: o.KeepPods, State: stress.RunPending}
	if pool.Annotations == nil {
		pool.Annotations = map[string]string{}
	}
	pool.Annotations[stress.AnnotationRun] = run.Encode()
	return run, nil
}

// followInterval is how often --wait reads the run.
var followInterval = 2 * time.Second

// handOver records the run on the pool's Pool object for the in-cluster controller and,
// with --wait, follows it. handed is false when the pool has no Pool object to record
// it on and --in-cluster was not asked for: the plugin then runs it itself.
func (o *StressRunOptions) handOver(ctx context.Context) (handed bool, err error) {
	var run stress.Run
	// An update, not a patch: two operators starting runs at once cannot both win. A
	// conflict (the controller wrote the Pool's status meanwhile, or another run was
	// recorded) reads the Pool again and judges again.
	err = nodeops.RetryOnConflict(func() error {
		pool, err := o.clients.Pools.Get(ctx, o.Pool)
		if err != nil {
			return err
		}
		if run, err = o.newRun(pool); err != nil {
			return err
		}
		_, err = o.clients.Pools.Update(ctx, pool, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		why := fmt.Sprintf("pool %s has no Pool object to record the run on", o.Pool)
		if o.Asked {
			return false, fmt.Errorf("--in-cluster: %s: run it with --in-cluster=false", why)
		}
		o.NoController = why
		return false, nil
	}
	var refused *runRefused
	if errors.As(err, &refused) {
		return false, refused.err
	}
	if err != nil {
		return false, fmt.Errorf("recording the stress run on pool %s: %w", o.Pool, err)
	}
	fmt.Fprintf(o.progress(), "stress run %s: handed to the controller in litepool-webhook; results go to the nodes (kubectl litepool get nodes --pool %s) and to the pool's %s annotation\n",
		run.ID, o.Pool, stress.AnnotationRun)
	if !o.Wait {
		return true, nil
	}
	return true, o.follow(ctx, run.ID)
}

// follow prints the run's progress whenever it changes until it ends, then its summary
// as a run in the plugin prints it; interrupting it leaves the run going.
func (o *StressRunOptions) follow(ctx context.Context, id string) error {
	last := ""
	var final stress.Run
	err := wait.PollUntilContextCancel(ctx, followInterval, true, func(ctx context.Context) (bool, error) {
		pool, err := o.clients.Pools.Get(ctx, o.Pool)
		if err != nil {
			return false, err
		}
		run, err := stress.DecodeRun(pool.Annotations[stress.AnnotationRun])
		if err != nil || run.ID != id {
			return false, fmt.Errorf("stress run %s: no longer recorded on pool %s", id, o.Pool)
		}
		line, err := o.progressLine(ctx, run)
		if err != nil {
			return false, err
		}
		if line != last {
			fmt.Fprintln(o.progress(), line)
			last = line
		}
		final = run
		return run.Finished(), nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped following stress run %s; it goes on in the cluster: %w", id, err)
		}
		return err
	}
	return o.report(final)
}

// progressLine: the run's state and, while it runs, its pods.
func (o *StressRunOptions) progressLine(ctx context.Context, run stress.Run) (string, error) {
	line := fmt.Sprintf("stress run %s: %s", run.ID, strings.ToLower(run.State))
	if run.State != stress.RunRunning {
		return line, nil
	}
	pods, err := o.clients.Kube.CoreV1().Pods(run.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{
		stress.LabelComponent: stress.Component, stress.LabelInstance: run.ID}.String()})
	if err != nil {
		return "", err
	}
	finished := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			finished++
		}
	}
	return fmt.Sprintf("%s: %d pod(s), %d finished", line, len(pods.Items), finished), nil
}

// report ends a followed run as a run in the plugin ends: the summary, and T2 when a
// node failed.
func (o *StressRunOptions) report(run stress.Run) error {
	if o.Output.Data() {
		if err := o.Output.Print(o.Out, run); err != nil {
			return err
		}
	}
	if run.State == stress.RunInterrupted {
		return fmt.Errorf("stress run %s interrupted: %s", run.ID, run.Message)
	}
	fmt.Fprintf(o.ErrOut, "pool %s: %d passed, %d failed, %d skipped\n", o.Pool, run.Passed, len(run.FailedNodes), run.Skipped)
	if len(run.FailedNodes) > 0 {
		return policy.Violationf("T2", "%d node(s) failed the stress test and are now %s=%s: %s", len(run.FailedNodes), policy.LabelHealth, policy.HealthDegraded, strings.Join(run.FailedNodes, ", "))
	}
	if run.Message != "" {
		return fmt.Errorf("stress run %s: %s", run.ID, run.Message)
	}
	return nil
}
