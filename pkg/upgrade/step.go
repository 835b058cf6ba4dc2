package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Outcome is what one step did.
type Outcome struct {
	// Done: the state's work is finished; the node moves to the next state.
	Done bool
	// Failed: the step cannot succeed; the node fails (and stays cordoned).
	Failed bool
	// Message says what was done, what the step waits for, or why it failed.
	Message string
	// Job is the installer Job the step made or watches.
	Job string
	// Retry: what the step waits for sends no event (a disruption budget refused an
	// eviction): only time tells, so the step is tried again after a while.
	Retry bool
}

func done(format string, args ...any) Outcome {
	return Outcome{Done: true, Message: fmt.Sprintf(format, args...)}
}
func waiting(format string, args ...any) Outcome {
	return Outcome{Message: fmt.Sprintf(format, args...)}
}
func failed(format string, args ...any) Outcome {
	return Outcome{Failed: true, Message: fmt.Sprintf(format, args...)}
}

// Stepper does one node's steps. Every step is idempotent and returns at once: called
// again in the same state (by the next reconcile, or by another process after a crash)
// it picks up what the last call did.
type Stepper struct {
	Kube kubernetes.Interface
	// Jobs, when set (the controller's cache of litepool's namespace), is where
	// installer Jobs are read; without it (the plugin) they are read live.
	Jobs client.Reader
	// Namespace is litepool's own namespace: the only one installer Jobs are made in.
	Namespace string
}

// Step does what can be done now of the node's current state st.State. since is when
// the node entered the state (its timeouts count from it); now is the time of the
// reconcile. A returned error is passing (the API server could not be reached): the
// step is tried again, the node does not fail.
func (s *Stepper) Step(ctx context.Context, ro *v1alpha1.DriverRollout, node *corev1.Node, st *v1alpha1.DriverRolloutNode, now time.Time) (Outcome, error) {
	t := TimeoutsOf(&ro.Spec)
	elapsed := time.Duration(0)
	if st.Since != nil {
		elapsed = now.Sub(st.Since.Time)
	}
	switch policy.UpgradeState(st.State) {
	case policy.UpgradeRequired:
		return Outcome{Done: true}, nil
	case policy.UpgradeCordon:
		_, err := nodeops.Cordon(ctx, s.Kube, policy.CordonUpgrade, node.Name, cmdutil.DryRunNone)
		return Outcome{Done: err == nil}, err
	case policy.UpgradeWaitJobs:
		return s.waitForJobs(ctx, ro, node.Name, t.Wait, elapsed)
	case policy.UpgradeDrain:
		return s.drain(ctx, ro, node.Name, t.Drain, elapsed)
	case policy.UpgradeInstall:
		return s.install(ctx, ro, node.Name, st.Attempt, t.Install, elapsed)
	case policy.UpgradeValidate:
		seen := policy.DriverVersion(node)
		switch {
		case seen == ro.Spec.Version:
			return done("driver-version label reads %s", seen), nil
		case t.Validate > 0 && elapsed >= t.Validate:
			return failed("validation timed out after %s: the node's driver-version label reads %q, want %q (labels %s)",
				t.Validate, seen, ro.Spec.Version, strings.Join(policy.DriverVersionLabels, ", ")), nil
		}
		return waiting("waiting for the driver-version label to read %s (reads %q)", ro.Spec.Version, seen), nil
	case policy.UpgradeUncordon:
		if !policy.HoldsCordon(policy.CordonUpgrade, node) {
			// Uncordon drops the upgrade's memory in the same update that makes the
			// node schedulable: without it, uncordon already happened.
			return Outcome{Done: true}, nil
		}
		stayed, heldBy, err := nodeops.Uncordon(ctx, s.Kube, policy.CordonUpgrade, node.Name, cmdutil.DryRunNone)
		switch {
		case err != nil:
			return Outcome{}, err
		case len(heldBy) > 0:
			return done("stays cordoned: still held by litepool's %s", strings.Join(heldBy, ", ")), nil
		case stayed:
			return done("stays cordoned: it was cordoned before the upgrade"), nil
		}
		return Outcome{Done: true}, nil
	}
	return failed("unknown upgrade state %q", st.State), nil
}

// waitForJobs lets the node's workload pods (matching the rollout's waitSelector)
// finish; after the timeout the drain evicts what is left, as NVIDIA's upgrade library
// does. A timeout of 0 skips the wait.
func (s *Stepper) waitForJobs(ctx context.Context, ro *v1alpha1.DriverRollout, node string, timeout, elapsed time.Duration) (Outcome, error) {
	if timeout <= 0 {
		return Outcome{Done: true}, nil
	}
	sel, err := labels.Parse(ro.Spec.WaitSelector)
	if err != nil {
		return failed("invalid spec.waitSelector %q: %v", ro.Spec.WaitSelector, err), nil
	}
	pods, err := s.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(), LabelSelector: sel.String(),
	})
	if err != nil {
		return Outcome{}, err
	}
	var left []string
	for i := range pods.Items {
		if inventory.IsWorkloadPod(&pods.Items[i]) && !nodejob.IsNodeWork(&pods.Items[i], s.Namespace) {
			left = append(left, pods.Items[i].Namespace+"/"+pods.Items[i].Name)
		}
	}
	switch {
	case len(left) == 0:
		return Outcome{Done: true}, nil
	case elapsed >= timeout:
		return done("%d workload pod(s) still running after %s (%s): the drain evicts them", len(left), timeout, strings.Join(left, ", ")), nil
	}
	return waiting("waiting up to %s for %d workload pod(s) to finish: %s", timeout, len(left), strings.Join(left, ", ")), nil
}

// drain is one pass of litepool's drain (nodeops.DrainStep: kubectl drain
// --ignore-daemonsets --delete-emptydir-data, with --force when the rollout says so,
// never litepool's node work) and is finished when no pod is left. Evictions a
// PodDisruptionBudget refuses are asked again at a later pass, until the drain timeout.
func (s *Stepper) drain(ctx context.Context, ro *v1alpha1.DriverRollout, node string, timeout, elapsed time.Duration) (Outcome, error) {
	res, err := nodeops.DrainStep(ctx, s.Kube, node, nodeops.StepOptions{Namespace: s.Namespace, Force: ro.Spec.ForceDrain})
	var cannot *nodeops.CannotDrainError
	if errors.As(err, &cannot) {
		return failed("%v", err), nil
	}
	if err != nil {
		return Outcome{}, err
	}
	left := res.Left()
	if len(left) == 0 {
		return Outcome{Done: true}, nil
	}
	if timeout > 0 && elapsed >= timeout {
		return failed("drain did not finish within %s: %d pod(s) left (%s)", timeout, len(left), strings.Join(left, ", ")), nil
	}
	out := waiting("evicting %d pod(s): %s", len(left), strings.Join(left, ", "))
	if len(res.Refused) > 0 {
		out.Message += fmt.Sprintf("; a disruption budget refuses %s for now", strings.Join(res.Refused, ", "))
		out.Retry = true
	}
	return out, nil
}

// installGrace is how long past its timeout an installer Job that never started is
// given before the node fails (a Job's activeDeadlineSeconds counts from its start).
const installGrace = time.Minute

// install makes the node's installer Job for this attempt (unless it exists: its name
// is deterministic) in litepool's namespace and watches it.
func (s *Stepper) install(ctx context.Context, ro *v1alpha1.DriverRollout, node string, attempt int32, timeout, elapsed time.Duration) (Outcome, error) {
	if s.Namespace == "" {
		return Outcome{}, fmt.Errorf("no namespace for installer Jobs")
	}
	runner := &nodejob.Runner{Kube: s.Kube, Cache: s.Jobs, Namespace: s.Namespace}
	job, err := runner.Ensure(ctx, InstallerSpec(ro, node, attempt, timeout))
	var foreign *nodejob.ForeignError
	if errors.As(err, &foreign) {
		return failed("installer %s", foreign.Error()), nil
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("installer %w", err)
	}
	o, err := runner.Outcome(ctx, job.Name)
	if err != nil {
		return Outcome{}, err
	}
	switch o.Phase {
	case nodejob.Succeeded:
		return Outcome{Done: true, Message: "installer job " + job.Name + " completed", Job: job.Name}, nil
	case nodejob.Failed:
		return Outcome{Failed: true, Message: "installer " + o.Message, Job: job.Name}, nil
	}
	// The Job's activeDeadlineSeconds fails it first; this catches a Job whose pod
	// never started (the deadline counts from the Job's start).
	if timeout > 0 && elapsed >= timeout+installGrace {
		return Outcome{Failed: true, Message: fmt.Sprintf("installer job %s/%s did not complete within %s", job.Namespace, job.Name, timeout), Job: job.Name}, nil
	}
	if job.Status.Active == 0 {
		// A Job whose pods cannot be made (Pod Security, a quota, a missing service
		// account) says so only in its events: point there rather than say it runs.
		return Outcome{Message: fmt.Sprintf("installer job %s/%s has no pod yet (image %s): `kubectl -n %s describe job %s` says why if it stays so",
			job.Namespace, job.Name, ro.Spec.Installer.Image, job.Namespace, job.Name), Job: job.Name}, nil
	}
	return Outcome{Message: fmt.Sprintf("installer job %s/%s running (image %s)", job.Namespace, job.Name, ro.Spec.Installer.Image), Job: job.Name}, nil
}
