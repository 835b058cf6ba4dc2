package realnode

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// faultCondition is one of the default conditions (Node Problem Detector's
// KernelDeadlock). The kubelet does not own it: its status updates are strategic merge
// patches keyed by condition type, computed from the node it just read, so a condition
// another writer set survives them (the step checks it is still there when it clears it).
const faultCondition = "KernelDeadlock"

// exit0 makes the test images' program succeed: the images that fail by default
// (driver-installer:fail exits 3, stress:fail exits 1) then exit 0, so one image
// serves both outcomes and only the exit code differs.
var exit0 = []string{"/testbin", "exit", "0"}

// testHealthLoop: the node health loop (issue 21) on the real node. litepool's
// controller runs as a local process against the cluster (litepool was uninstalled by
// the steps before), approving the test images (--health-images=litepool.local/) and
// defining the remediations the pool names (--health-definition); the
// test plays Node Problem Detector with a node condition. The remediation Job and the
// re-check stress pod are real containers on the real kubelet, and their exit codes
// decide: remediation exit 0 goes on to the re-check, exit 3 holds the node out;
// re-check exit 0 returns it after the hold time, exit 1 holds it out.
func testHealthLoop(t *testing.T) {
	c := framework.C
	kube := c.Kube
	// What the steps before left: their runs and installer Jobs, the node cordoned by
	// the failed upgrade and degraded by the failed stress run (a signal of its own).
	for _, kind := range []string{"driverrollouts.runwhere.ai", "stressruns.runwhere.ai"} {
		res := c.Kubectl(t, "", "delete", kind, "--all", "--wait=true", "--timeout=60s")
		require.Equal(t, 0, res.ExitCode, res.Stderr)
	}
	res := c.Kubectl(t, "", "delete", "jobs", "-n", system, "--all", "--cascade=foreground", "--wait=true", "--timeout=60s")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	clean := `{"metadata":{"labels":{"` + policy.LabelHealth + `":null},"annotations":{"` + policy.AnnotationUpgradeState + `":null,"` +
		policy.AnnotationUpgradeMessage + `":null}},"spec":{"unschedulable":null}}`
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(clean), metav1.PatchOptions{})
	require.NoError(t, err)

	ctrl := startHealthController(t)
	// remedy: nil no remediation; the re-check runs the stress image with recheckCmd.
	setHealth := func(remedy *v1alpha1.RemediationSpec, recheckCmd []string) {
		t.Helper()
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pools := poolclient.New(c.Dynamic)
			p, err := pools.Get(ctx, realPool)
			if err != nil {
				return err
			}
			p.Spec.StressTest = &v1alpha1.StressTestSpec{Image: stressFailing, Tests: []v1alpha1.StressTest{"npu"}}
			p.Spec.Health = &v1alpha1.HealthPolicy{
				HoldTime: &metav1.Duration{Duration: 3 * time.Second}, FlapWindow: &metav1.Duration{Duration: time.Second},
				Recheck: &v1alpha1.RecheckSpec{Command: recheckCmd}, Remediation: remedy,
			}
			_, err = pools.Update(ctx, p, metav1.UpdateOptions{})
			return err
		}))
	}

	remedy := func(definition string) *v1alpha1.RemediationSpec {
		return &v1alpha1.RemediationSpec{Definition: definition, Timeout: &metav1.Duration{Duration: 2 * time.Minute}}
	}

	t.Run("remediation exits 0, the re-check exits 0: held, then back", func(t *testing.T) {
		setHealth(remedy("reset-ok"), exit0)
		setFault(t, corev1.ConditionTrue)
		e := waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool { return e.Job != "" })
		assert.Equal(t, "Condition/"+faultCondition, e.Reason)
		waitQuarantineTaint(t, true, "quarantined with litepool's taint")
		assertExited(t, finishedPod(t, "batch.kubernetes.io/job-name="+e.Job), 0)
		// Remediated, the signal still up: it waits out of service for the signal.
		e = waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool { return e.Remediated })
		assert.Equal(t, v1alpha1.NodeHealthQuarantined, e.State, "remediated, the condition still set")
		setFault(t, corev1.ConditionFalse)
		// The hold time (3s) is read before it ends: a Healthy entry is forgotten after
		// the flap window (1s).
		e = waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool { return e.State == v1alpha1.NodeHealthHolding })
		assert.Equal(t, []v1alpha1.NodeHealthState{v1alpha1.NodeHealthQuarantined, v1alpha1.NodeHealthRemediating,
			v1alpha1.NodeHealthQuarantined, v1alpha1.NodeHealthRechecking, v1alpha1.NodeHealthHolding}, states(e))
		assert.NotNil(t, quarantineTaint(t), "still out during the hold time")
		// A passed test's pod is deleted; the run keeps what its container exited with,
		// for as long as the node's entry names it (the hold time).
		res := recheckResult(t)
		assert.Equal(t, v1alpha1.StressOutcomePassed, res.Outcome)
		require.NotNil(t, res.ExitCode, "the run read the real container's exit code")
		assert.Equal(t, int32(0), *res.ExitCode)
		waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool { return e.State == v1alpha1.NodeHealthHealthy })
		waitQuarantineTaint(t, false, "back in service")
		// Back in service, the node keeps no re-check run (issue 32: nothing left behind).
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			list, err := c.Dynamic.Resource(v1alpha1.GroupVersion.WithResource("stressruns")).List(ctx,
				metav1.ListOptions{LabelSelector: health.Selector().String()})
			return err == nil && len(list.Items) == 0, err
		}), "the re-check run of a node back in service is deleted")
	})

	t.Run("remediation exits 3: held out, RemediationFailed", func(t *testing.T) {
		setHealth(remedy("reset-fails"), exit0)
		pastFlapWindow(t)
		setFault(t, corev1.ConditionTrue)
		e := waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool { return e.State == v1alpha1.NodeHealthHeldOut })
		assert.Equal(t, policy.ReasonRemediationFailed, e.Reason, e.Message)
		assertExited(t, finishedPod(t, "batch.kubernetes.io/job-name="+e.Job), 3)
		setFault(t, corev1.ConditionFalse)
		assert.NotNil(t, quarantineTaint(t), "held out: the taint stays with the signal gone")
		res := c.Litepool(t, "health", "release", node)
		require.Equal(t, 0, res.ExitCode, "%s\n%s", res.Stdout, res.Stderr)
		waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool { return e.State == v1alpha1.NodeHealthHealthy })
		waitQuarantineTaint(t, false, "released by hand")
	})

	t.Run("no remediation, the re-check exits 1: held out, RecheckFailed", func(t *testing.T) {
		require.NoError(t, c.Dynamic.Resource(v1alpha1.GroupVersion.WithResource("stressruns")).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: health.Selector().String()}))
		setHealth(nil, nil)
		pastFlapWindow(t)
		setFault(t, corev1.ConditionTrue)
		waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool {
			return e.State == v1alpha1.NodeHealthQuarantined && !e.Remediated
		})
		setFault(t, corev1.ConditionFalse)
		e := waitHealth(t, ctrl, func(e *v1alpha1.NodeHealthStatus) bool { return e.State == v1alpha1.NodeHealthHeldOut })
		assert.Equal(t, policy.ReasonRecheckFailed, e.Reason, e.Message)
		assert.Empty(t, e.Job, "no remediation ran")
		res := recheckResult(t)
		assert.Equal(t, v1alpha1.StressOutcomeFailed, res.Outcome)
		assertExited(t, finishedPod(t, stress.LabelInstance+"="+res.Run), 1)
		assert.NotNil(t, quarantineTaint(t), "stays out")
	})

	// The loop turned off gives its node back; the failed re-check's degraded label
	// is the stress runs' own, removed with them.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pools := poolclient.New(c.Dynamic)
		p, err := pools.Get(ctx, realPool)
		if err != nil {
			return err
		}
		p.Spec.Health = nil
		_, err = pools.Update(ctx, p, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return quarantineTaint(t) == nil, nil
	}), "turning the loop off takes the taint off")
	res = c.Kubectl(t, "", "delete", "stressruns.runwhere.ai", "--all", "--wait=true", "--timeout=60s")
	assert.Equal(t, 0, res.ExitCode, res.Stderr)
	_, err = kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+policy.LabelHealth+`":null}}}`), metav1.PatchOptions{})
	assert.NoError(t, err)
}

// startHealthController runs litepool-webhook with its controllers, as the Deployment
// would, approving the images make image built, and waits until it leads.
func startHealthController(t *testing.T) *localwebhook.LogBuffer {
	t.Helper()
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	logs := &localwebhook.LogBuffer{}
	p, err := localwebhook.Launch(localwebhook.Options{Binary: filepath.Join(framework.BinDir, "litepool-webhook"),
		Kubeconfig: framework.C.Kubeconfig, Namespace: system, Output: logs,
		Flags: []string{"--cert-mode=files", "--cert-dir=" + certs.Dir, "--controllers=true", "--leader-elect=true",
			"--health-images=litepool.local/",
			// The operator's remediations: the failing installer's image, its
			// entrypoint (exit 3) or exit 0.
			`--health-definition=reset-ok={"image": "` + installerFailing + `", "command": ["/testbin", "exit", "0"]}`,
			`--health-definition=reset-fails={"image": "` + installerFailing + `"}`}})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop(10 * time.Second) // a leader gives its Lease back
		if t.Failed() {
			t.Logf("litepool-webhook log:\n%s", logs.String())
		}
	})
	require.NoError(t, p.WaitReady(ctx, 60*time.Second), logs.String())
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(strings.ToLower(logs.String()), "successfully acquired lease"), nil
	}), "never became leader:\n%s", logs.String())
	return logs
}

// setFault plays Node Problem Detector: faultCondition with status, through the
// node's status subresource. Clearing it checks that what was set is still there.
func setFault(t *testing.T, status corev1.ConditionStatus) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := framework.Node(t, node)
		found := false
		for i := range cur.Status.Conditions {
			if string(cur.Status.Conditions[i].Type) == faultCondition {
				if status == corev1.ConditionFalse {
					assert.Equal(t, corev1.ConditionTrue, cur.Status.Conditions[i].Status, "the kubelet's status updates left the condition as set")
				}
				cur.Status.Conditions[i].Status, found = status, true
				cur.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		if !found {
			require.Equal(t, corev1.ConditionTrue, status, "the kubelet's status updates removed %s", faultCondition)
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.NodeCondition{Type: faultCondition, Status: status,
				Reason: "TestProblem", Message: "played by the real-node e2e test", LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()})
		}
		_, err := framework.C.Kube.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}))
}

// waitHealth waits until the node's entry in the pool's status satisfies ok.
func waitHealth(t *testing.T, logs *localwebhook.LogBuffer, ok func(*v1alpha1.NodeHealthStatus) bool) *v1alpha1.NodeHealthStatus {
	t.Helper()
	var last *v1alpha1.NodeHealthStatus
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		p, err := poolclient.New(framework.C.Dynamic).Get(ctx, realPool)
		if err != nil {
			return false, nil
		}
		for i := range p.Status.NodeHealth {
			if e := p.Status.NodeHealth[i]; e.Node == node {
				last = &e
				return ok(&e), nil
			}
		}
		// A Healthy entry past its flap window is forgotten.
		last = &v1alpha1.NodeHealthStatus{Node: node, State: v1alpha1.NodeHealthHealthy}
		return ok(last), nil
	})
	log := ""
	if logs != nil {
		log = logs.String()
	}
	require.NoError(t, err, "last entry: %+v\npods:\n%s\nlog:\n%s", last, podReport(t), log)
	return last
}

// pastFlapWindow waits until the node returned longer ago than the pool's flap window
// (1s), so that the next fault is a new one, not a flap.
func pastFlapWindow(t *testing.T) {
	t.Helper()
	e := waitHealth(t, nil, func(e *v1alpha1.NodeHealthStatus) bool { return e.State == v1alpha1.NodeHealthHealthy })
	if e.ReturnedAt != nil { // a release by hand forgets it
		time.Sleep(time.Until(e.ReturnedAt.Add(1500 * time.Millisecond)))
	}
}

func states(e *v1alpha1.NodeHealthStatus) []v1alpha1.NodeHealthState {
	var out []v1alpha1.NodeHealthState
	for _, h := range e.History {
		out = append(out, h.State)
	}
	return out
}

// waitQuarantineTaint waits until the node carries the quarantine taint (on) or not. The
// loop stores an entry before it follows it (taint, Job, re-check: pkg/health's follow),
// so the entry can be read a moment before the node shows it.
func waitQuarantineTaint(t *testing.T, on bool, what string) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return (quarantineTaint(t) != nil) == on, nil
	}), what)
}

func quarantineTaint(t *testing.T) *corev1.Taint {
	for _, tn := range framework.Node(t, node).Spec.Taints {
		if tn.Key == policy.TaintQuarantine {
			return &tn
		}
	}
	return nil
}

type recheck struct {
	v1alpha1.StressNodeResult
	Run string
}

// recheckResult is the node's result in the one re-check StressRun the loop made.
func recheckResult(t *testing.T) recheck {
	t.Helper()
	list, err := framework.C.Dynamic.Resource(v1alpha1.GroupVersion.WithResource("stressruns")).List(ctx,
		metav1.ListOptions{LabelSelector: health.Selector().String()})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	var run v1alpha1.StressRun
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[0].Object, &run))
	for _, r := range run.Status.Results {
		if r.Node == node {
			return recheck{StressNodeResult: r, Run: run.Name}
		}
	}
	require.Failf(t, "no result", "run %s has no result for %s: %+v", run.Name, node, run.Status)
	return recheck{}
}

// finishedPod waits until the one pod of litepool's namespace matching selector has
// ended, and returns it.
func finishedPod(t *testing.T, selector string) corev1.Pod {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		pods, err := framework.C.Kube.CoreV1().Pods(system).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		ph := pods.Items[0].Status.Phase
		return ph == corev1.PodSucceeded || ph == corev1.PodFailed, nil
	}), "no finished pod %s\n%s", selector, podReport(t))
	return onlyPod(t, selector)
}
