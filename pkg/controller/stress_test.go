package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
)

func poolWithRun(name string, run stress.Run) *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{stress.AnnotationRun: run.Encode()}}}
}

func recordedRun(t *testing.T, c client.Client, pool string) stress.Run {
	t.Helper()
	run, err := stress.DecodeRun(getPool(t, c, pool).Annotations[stress.AnnotationRun])
	require.NoError(t, err)
	return run
}

func newStressReconciler(t *testing.T, objs ...client.Object) (*StressReconciler, client.Client, *kubefake.Clientset) {
	t.Helper()
	_, c, _ := newReconciler(t, objs...)
	kube := kubefake.NewClientset(node("n1", "p", 8, true), node("n2", "p", 8, false))
	return &StressReconciler{Client: c, Kube: kube, Recorder: &events.Recorder{Client: kube}, Identity: "replica-a",
		running: map[string]bool{}}, c, kube
}

func reconcilePool(t *testing.T, r *StressReconciler, name string) {
	t.Helper()
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	require.NoError(t, err)
}

// A Pending run is claimed (Running, with this replica as holder), executed with the
// Runner, and recorded Done with its results; the node results land on the nodes.
func TestStressReconcilerRunsAPendingRunAndRecordsItsResult(t *testing.T) {
	run := stress.Run{ID: "s1", Image: "stress:1", Tests: []string{"npu"}, Namespace: "default", Timeout: "1s", State: stress.RunPending}
	r, c, kube := newStressReconciler(t, poolWithRun("p", run))
	reconcilePool(t, r, "p")
	claimed := recordedRun(t, c, "p")
	if claimed.State != stress.RunDone { // the run may already have ended
		assert.Equal(t, stress.RunRunning, claimed.State)
		assert.Equal(t, "replica-a", claimed.Holder)
	}
	// While it runs, another pass over the pool starts nothing.
	reconcilePool(t, r, "p")

	require.Eventually(t, func() bool { return recordedRun(t, c, "p").State == stress.RunDone }, 20*time.Second, 50*time.Millisecond)
	done := recordedRun(t, c, "p")
	// Fake pods never finish: n1 outlives the 1s timeout and fails; n2 is NotReady.
	assert.Equal(t, []string{"n1"}, done.FailedNodes)
	assert.Equal(t, 1, done.Skipped)
	assert.Zero(t, done.Passed)
	n1, err := kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, policy.HealthDegraded, n1.Labels[policy.LabelHealth])
	assert.Contains(t, n1.Annotations[policy.AnnotationStressResult], "did not finish within 1s")
	assert.Equal(t, []string{"s1"}, createdPods(kube), "one test pod, labelled with the run's id")

	// Done is final: reconciling again runs nothing.
	require.Eventually(t, func() bool { return !r.isRunning("p") }, 5*time.Second, 10*time.Millisecond)
	reconcilePool(t, r, "p")
	assert.Equal(t, done, recordedRun(t, c, "p"))
	assert.Equal(t, []string{"s1"}, createdPods(kube), "the run is not run again")
}

// createdPods lists the run id of each pod created through kube.
func createdPods(kube *kubefake.Clientset) []string {
	var ids []string
	for _, a := range kube.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			ids = append(ids, c.GetObject().(*corev1.Pod).Labels[stress.LabelInstance])
		}
	}
	return ids
}

// A run found Running that this replica did not start was cut short by a leader
// change: it is marked Interrupted and never run again.
func TestStressReconcilerInterruptsARunItDidNotStart(t *testing.T) {
	run := stress.Run{ID: "s2", Image: "stress:1", Tests: []string{"npu"}, Namespace: "default", Timeout: "1m",
		State: stress.RunRunning, Holder: "replica-gone"}
	r, c, kube := newStressReconciler(t, poolWithRun("p", run))
	reconcilePool(t, r, "p")
	got := recordedRun(t, c, "p")
	assert.Equal(t, stress.RunInterrupted, got.State)
	assert.Contains(t, got.Message, "leader change")
	assert.False(t, r.isRunning("p"))
	assert.Empty(t, createdPods(kube), "an interrupted run is not run again")
}

// Pools without a run, with a finished run, or whose run this replica is running are
// left alone.
func TestStressReconcilerLeavesOtherPoolsAlone(t *testing.T) {
	finished := stress.Run{ID: "s3", State: stress.RunInterrupted, Message: "x", Timeout: "1m"}
	mine := stress.Run{ID: "s4", State: stress.RunRunning, Holder: "replica-a", Timeout: "1m"}
	plain := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	r, c, kube := newStressReconciler(t, poolWithRun("old", finished), poolWithRun("mine", mine), plain)
	r.running["mine"] = true
	for _, p := range []string{"old", "mine", "plain", "gone"} {
		reconcilePool(t, r, p)
	}
	assert.Equal(t, finished, recordedRun(t, c, "old"))
	assert.Equal(t, mine, recordedRun(t, c, "mine"))
	assert.NotContains(t, getPool(t, c, "plain").Annotations, stress.AnnotationRun)
	assert.Empty(t, createdPods(kube))
}
