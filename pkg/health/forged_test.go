package health

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Issue 28 item 6: a writer of pools/status (litepool-health-operator, meant for
// release and hold) adds {state: Quarantined, fatal: true} for a healthy member of a
// pool that drains. The loop does not take the entry's fatal for the node's: nothing
// on the node is fatal, so no pod is evicted, nor when the loop's taint already carries
// the forged reason. A fatal condition the node shows now still drains.
func TestAForgedFatalEntryDrainsNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		taint     string
		wantDrain bool
		fatalNow  bool
	}{
		{name: "forged: the node shows no fatal fault", wantDrain: false},
		// Two writes: an entry whose reason names a fatal condition (the loop taints the
		// node with that reason), then fatal: true. The taint is the status writer's word too.
		{name: "forged twice: the loop's taint carries the forged reason", taint: "Condition/SysLogsXIDError", wantDrain: false},
		{name: "the node shows the fatal condition now", fatalNow: true, wantDrain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n1 := member("n1", "8")
			if tc.taint != "" {
				n1.Spec.Taints = []corev1.Taint{policy.QuarantineTaint(tc.taint)}
			}
			if tc.fatalNow {
				n1.Status.Conditions = append(n1.Status.Conditions, corev1.NodeCondition{Type: "SysLogsXIDError", Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.Time{Time: now}})
			}
			r, kube := setup(t, nil, n1, member("n2", "8"), member("n3", "8"), member("n4", "8"))
			ctx := context.Background()
			train := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "tenant"},
				Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			_, err := kube.CoreV1().Pods("tenant").Create(ctx, train, metav1.CreateOptions{})
			require.NoError(t, err)
			var pool v1alpha1.Pool
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			pool.Spec.Health.Drain = true
			require.NoError(t, r.Client.Update(ctx, &pool))
			pool.Status.NodeHealth = []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthQuarantined, Fatal: true,
				Reason: "Condition/SysLogsXIDError", FaultedAt: &metav1.Time{Time: now}}}
			require.NoError(t, r.Client.Status().Update(ctx, &pool))

			_, err = r.Reconcile(ctx, poolP1)
			require.NoError(t, err)
			evictions := 0
			for _, a := range kube.Actions() {
				if a.GetVerb() == "create" && a.GetSubresource() == "eviction" {
					evictions++
				}
			}
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			if tc.wantDrain {
				assert.Equal(t, 1, evictions)
				assert.Equal(t, v1alpha1.NodeHealthDraining, pool.Status.NodeHealth[0].State)
				return
			}
			assert.Zero(t, evictions, "no pod evicted on the word of the Pool's status")
			assert.NotEqual(t, v1alpha1.NodeHealthDraining, pool.Status.NodeHealth[0].State)
			assert.False(t, pool.Status.NodeHealth[0].Fatal)
		})
	}
}

// A pools/status writer's entry naming someone else's Job or StressRun: the loop
// drops the names when it moves the node on, and deletes neither.
func TestAForgedEntryDeletesNothingItDoesNotOwn(t *testing.T) {
	r, kube := setup(t, nil, member("n1", "8"), member("n2", "8"))
	ctx := context.Background()
	installer := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "litepool-driver-installer-n1-x", Namespace: r.Namespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "runwhere.ai/v1alpha1", Kind: "DriverRollout", Name: "ro", UID: "ro-uid", Controller: ptr.To(true)}}}}
	_, err := kube.BatchV1().Jobs(r.Namespace).Create(ctx, installer, metav1.CreateOptions{})
	require.NoError(t, err)
	theirs := &v1alpha1.StressRun{ObjectMeta: metav1.ObjectMeta{Name: "someones-run"}}
	require.NoError(t, r.Client.Create(ctx, theirs))
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	pool.Status.NodeHealth = []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthReleased, By: "mallory",
		Job: installer.Name, StressRun: theirs.Name}}
	require.NoError(t, r.Client.Status().Update(ctx, &pool))

	_, err = r.Reconcile(ctx, poolP1)
	require.NoError(t, err)
	_, err = kube.BatchV1().Jobs(r.Namespace).Get(ctx, installer.Name, metav1.GetOptions{})
	assert.NoError(t, err, "a rollout's installer Job is not deleted for a status entry")
	assert.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: theirs.Name}, &v1alpha1.StressRun{}), "someone else's run is not deleted")
}

// A pools/status writer's Quarantined entry for a healthy member of a pool with a
// remediation definition: the operator's remediation (privileged) does not run on the
// entry's word; with the node's own signal it does.
func TestAForgedEntryRunsNoRemediation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		alloc   string // "7": a device is gone, the node's own signal
		wantJob bool
	}{
		{name: "forged: the node shows no fault", alloc: "8", wantJob: false},
		{name: "the node shows the fault", alloc: "7", wantJob: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, kube := setup(t, []string{"registry.example.com/"}, member("n1", tc.alloc), member("n2", "8"), member("n3", "8"), member("n4", "8"))
			r.Definitions = map[string]Definition{"reset": {Image: digest, Command: []string{"/reset"}}}
			ctx := context.Background()
			var pool v1alpha1.Pool
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			pool.Spec.Health.Remediation = &v1alpha1.RemediationSpec{Definition: "reset"}
			require.NoError(t, r.Client.Update(ctx, &pool))
			pool.Status.NodeHealth = []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthQuarantined,
				Reason: policy.SignalDeviceUnhealthy, Since: metav1.Time{Time: now}, FaultedAt: &metav1.Time{Time: now}}}
			require.NoError(t, r.Client.Status().Update(ctx, &pool))

			_, err := r.Reconcile(ctx, poolP1)
			require.NoError(t, err)
			jobs, err := kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			if tc.wantJob {
				assert.Len(t, jobs.Items, 1, "the node's own signal: the operator's remediation runs")
				return
			}
			assert.Empty(t, jobs.Items, "no privileged Job on the word of the Pool's status")
		})
	}
}

// Issue 32: orders are not in the status. A writer of pools/status only (the right
// `health release` used to need) rewrites the entry of a node the loop holds out, or of
// one it re-checks, to have it returned: the node keeps its quarantine taint, which
// that writer cannot touch. A release in spec.health.release (a Pool editor's right)
// returns it.
func TestAStatusWriterCannotReturnANode(t *testing.T) {
	taintedAt := now.Add(-time.Hour)
	heldOut := v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: policy.ReasonFlapping,
		Since: metav1.Time{Time: taintedAt}, FaultedAt: &metav1.Time{Time: taintedAt}}
	for _, tc := range []struct {
		name    string
		taint   string
		forged  []v1alpha1.NodeHealthStatus
		release *metav1.Time
		want    v1alpha1.NodeHealthState
	}{
		{name: "the old order: state Released", taint: policy.ReasonFlapping,
			forged: []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthReleased, By: "mallory", Since: metav1.Time{Time: now}}},
			want:   v1alpha1.NodeHealthHeldOut},
		{name: "the entry removed", taint: policy.ReasonFlapping, want: v1alpha1.NodeHealthHeldOut},
		{name: "the entry says Healthy", taint: policy.ReasonFlapping,
			forged: []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthHealthy}}, want: v1alpha1.NodeHealthHeldOut},
		{name: "the entry says Holding, long ago", taint: policy.ReasonFlapping,
			forged: []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthHolding, Since: metav1.Time{Time: now.Add(-48 * time.Hour)}}},
			want:   v1alpha1.NodeHealthHeldOut},
		{name: "a quarantined node's entry says Holding, long ago, with no re-check run", taint: policy.SignalDeviceUnhealthy,
			forged: []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthHolding, Reason: policy.ReasonRecovered,
				Since: metav1.Time{Time: now.Add(-48 * time.Hour)}, FaultedAt: &metav1.Time{Time: taintedAt}}},
			want: v1alpha1.NodeHealthRechecking},
		{name: "a release in spec", taint: policy.ReasonFlapping, forged: []v1alpha1.NodeHealthStatus{heldOut},
			release: &metav1.Time{Time: now}, want: v1alpha1.NodeHealthHealthy},
		{name: "a release in spec older than the quarantine", taint: policy.ReasonFlapping, forged: []v1alpha1.NodeHealthStatus{heldOut},
			release: &metav1.Time{Time: taintedAt.Add(-time.Minute)}, want: v1alpha1.NodeHealthHeldOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n1 := member("n1", "8")
			taint := policy.QuarantineTaint(tc.taint)
			taint.TimeAdded = &metav1.Time{Time: taintedAt}
			n1.Spec.Taints = []corev1.Taint{taint}
			r, kube := setup(t, []string{"registry.example.com/"}, n1, member("n2", "8"), member("n3", "8"), member("n4", "8"))
			ctx := context.Background()
			var pool v1alpha1.Pool
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			if tc.release != nil {
				pool.Spec.Health.Release = []v1alpha1.NodeRelease{{Node: "n1", At: *tc.release, By: "alice"}}
				require.NoError(t, r.Client.Update(ctx, &pool))
			}
			pool.Status.NodeHealth = tc.forged
			require.NoError(t, r.Client.Status().Update(ctx, &pool))

			_, err := r.Reconcile(ctx, poolP1)
			require.NoError(t, err)
			node, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			require.NoError(t, err)
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			require.Len(t, pool.Status.NodeHealth, 1)
			assert.Equal(t, tc.want, pool.Status.NodeHealth[0].State)
			if tc.want == v1alpha1.NodeHealthHealthy {
				assert.Nil(t, policy.QuarantineTaintOf(node), "released by the order in spec")
				assert.Equal(t, "released by alice (spec.health.release)", pool.Status.NodeHealth[0].Message)
				return
			}
			assert.NotNil(t, policy.QuarantineTaintOf(node), "still out: the status is no order")
		})
	}
}

// Issue 38 part 3: a writer of pools/status writes {Quarantined, fatal} for all 4
// healthy members of a pool whose breaker allows 1 out. An entry that no signal, hold or
// taint backs is memory: it is honoured only within the breaker (1 tainted, the others'
// entries are dropped with an Event naming the rule), the one honoured goes to its
// re-check and returns when it passes, and its episode is no flap. Before, all 4 were
// tainted.
func TestForgedEntriesStayWithinTheBreaker(t *testing.T) {
	r, kube := forgedFatalForAllFour(t, true)
	ctx := context.Background()
	var pool v1alpha1.Pool
	taintedNodes := func() (out []string) {
		for _, n := range []string{"n1", "n2", "n3", "n4"} {
			node, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			require.NoError(t, err)
			if policy.QuarantineTaintOf(node) != nil {
				out = append(out, n)
			}
		}
		return out
	}

	for range 3 { // and it stays so on the passes after
		_, err := r.Reconcile(ctx, poolP1)
		require.NoError(t, err)
		assert.Equal(t, []string{"n1"}, taintedNodes(), "at most the breaker's share (25% of 4: 1) is out")
	}
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	require.Len(t, pool.Status.NodeHealth, 1)
	e := pool.Status.NodeHealth[0]
	assert.Equal(t, "n1", e.Node)
	assert.Equal(t, v1alpha1.NodeHealthRechecking, e.State, "memory goes to its re-check, never held")
	assert.Equal(t, policy.ReasonUnbacked, e.Reason)
	assert.False(t, e.Fatal, "nothing is drained on memory")
	assert.Equal(t, int32(1), pool.Status.QuarantinedNodes)
	refused := 0
	for _, a := range kube.Actions() {
		c, ok := a.(k8stesting.CreateAction)
		if !ok {
			continue
		}
		if ev, ok := c.GetObject().(*corev1.Event); ok && ev.Reason == "HealthEntryNotHonoured" {
			refused++
			assert.Contains(t, ev.Message, "not honoured: the circuit breaker (spec.health.maxQuarantinedPercent 25%) is full")
		}
	}
	assert.Equal(t, 3, refused, "one Event for each entry not honoured, once")

	// The re-check passes; after the hold time n1 returns, and no flap is remembered.
	var run v1alpha1.StressRun
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: e.StressRun}, &run))
	run.Status.Phase = v1alpha1.StressRunSucceeded
	run.Status.CompletionTime = &metav1.Time{Time: now}
	run.Status.Results = []v1alpha1.StressNodeResult{{Node: "n1", Outcome: v1alpha1.StressOutcomePassed}}
	require.NoError(t, r.Client.Update(ctx, &run)) // the fake keeps no status subresource for runs
	_, err := r.Reconcile(ctx, poolP1)
	require.NoError(t, err)
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	require.Equal(t, v1alpha1.NodeHealthHolding, pool.Status.NodeHealth[0].State)
	r.Now = func() time.Time { return now.Add(policy.DefaultHoldTime + time.Second) }
	// The controller's cache of nodes catches up with the taint the loop put on.
	live, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err)
	var cached corev1.Node
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "n1"}, &cached))
	cached.Spec.Taints = live.Spec.Taints
	require.NoError(t, r.Client.Update(ctx, &cached))
	_, err = r.Reconcile(ctx, poolP1)
	require.NoError(t, err)
	assert.Empty(t, taintedNodes(), "returned after its re-check")
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	for _, e := range pool.Status.NodeHealth {
		assert.Nil(t, e.ReturnedAt, "an episode no signal began is no flap")
	}
}

// A held-out entry forged for a quarantined member (its taint a quarantine's): a hold
// by hand, or a flap, that no order or taint backs. The node is re-checked as a
// quarantine, neither held indefinitely nor released on the next pass.
func TestAForgedHoldOfAQuarantinedNodeIsRechecked(t *testing.T) {
	for _, reason := range []string{policy.ReasonHeldByHand, policy.ReasonFlapping} {
		t.Run(reason, func(t *testing.T) {
			n1 := member("n1", "8")
			n1.Spec.Taints = []corev1.Taint{policy.QuarantineTaint(policy.SignalDeviceUnhealthy)}
			r, kube := setup(t, []string{"registry.example.com/"}, n1, member("n2", "8"), member("n3", "8"), member("n4", "8"))
			ctx := context.Background()
			var pool v1alpha1.Pool
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			pool.Status.NodeHealth = []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: reason, By: "mallory",
				Since: metav1.Time{Time: now}}}
			require.NoError(t, r.Client.Status().Update(ctx, &pool))
			for range 2 {
				_, err := r.Reconcile(ctx, poolP1)
				require.NoError(t, err)
				node, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
				require.NoError(t, err)
				assert.NotNil(t, policy.QuarantineTaintOf(node), "still out until its re-check")
				require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
				require.Len(t, pool.Status.NodeHealth, 1)
				assert.Equal(t, v1alpha1.NodeHealthRechecking, pool.Status.NodeHealth[0].State)
				assert.NotEmpty(t, pool.Status.NodeHealth[0].StressRun)
			}
		})
	}
}

// A node whose step cannot be followed (its taint write fails) stops neither the other
// members' steps nor their Events: the forged entries past the breaker are refused with
// an Event each in the same pass, though the pass returns the taint's error. Before,
// the first failed effect ended the pass's effects, and the retry found the refusals
// stored and recorded nothing.
func TestAFailedStepKeepsTheOthersEvents(t *testing.T) {
	r, kube := forgedFatalForAllFour(t, false)
	ctx := context.Background()
	taintFails := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if named, ok := a.(interface{ GetName() string }); ok && named.GetName() == "n1" {
			return true, nil, errors.New("injected: the node write failed")
		}
		if u, ok := a.(k8stesting.UpdateAction); ok {
			if n, ok := u.GetObject().(*corev1.Node); ok && n.Name == "n1" {
				return true, nil, errors.New("injected: the node write failed")
			}
		}
		return false, nil, nil
	}
	kube.PrependReactor("update", "nodes", taintFails)
	kube.PrependReactor("patch", "nodes", taintFails)

	_, err := r.Reconcile(ctx, poolP1)
	require.ErrorContains(t, err, "injected: the node write failed", "the failed step is returned, for a retry")
	refused := 0
	for _, a := range kube.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok {
			if ev, ok := c.GetObject().(*corev1.Event); ok && ev.Reason == "HealthEntryNotHonoured" {
				refused++
			}
		}
	}
	assert.Equal(t, 3, refused, "an Event for each entry refused, though n1's taint failed first")
}

// forgedFatalForAllFour is a pool of 4 healthy members whose breaker allows 1 out
// (maxQuarantinedPercent 25, drain as given), with {Quarantined, fatal} written into its
// status for all 4 as a pools/status writer would; Events are recorded.
func forgedFatalForAllFour(t *testing.T, drain bool) (*Reconciler, *kubefake.Clientset) {
	t.Helper()
	r, kube := setup(t, []string{"registry.example.com/"}, member("n1", "8"), member("n2", "8"), member("n3", "8"), member("n4", "8"))
	r.Recorder = &events.Recorder{Client: kube}
	ctx := context.Background()
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	pool.Spec.Health.MaxQuarantinedPercent = 25
	pool.Spec.Health.Drain = drain
	require.NoError(t, r.Client.Update(ctx, &pool))
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		pool.Status.NodeHealth = append(pool.Status.NodeHealth, v1alpha1.NodeHealthStatus{Node: n, State: v1alpha1.NodeHealthQuarantined, Fatal: true,
			Reason: "Condition/SysLogsXIDError", Since: metav1.Time{Time: now}, FaultedAt: &metav1.Time{Time: now}})
	}
	require.NoError(t, r.Client.Status().Update(ctx, &pool))
	return r, kube
}
