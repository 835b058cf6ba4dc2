package stress

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

const ns = "litepool-system"

type fixture struct {
	// statusWrite, when set, may refuse the status write it is given (by number, from 1).
	statusWrite func(n int) error
	writes      int
	t           *testing.T
	r           *Reconciler
	kube        *fake.Clientset
	cr          client.Client
	clock       *clocktesting.FakeClock
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	kube := fake.NewClientset(objs...)
	f := &fixture{t: t, kube: kube}
	f.cr = crfake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.StressRun{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			f.writes++
			if f.statusWrite != nil {
				if err := f.statusWrite(f.writes); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	f.clock = clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	f.r = &Reconciler{Client: f.cr, Live: f.cr, Pods: PodsOf(kube), Kube: kube, Recorder: &events.Recorder{Client: kube},
		Namespace: ns, Clock: f.clock}
	return f
}

func (f *fixture) create(run *v1alpha1.StressRun) {
	f.t.Helper()
	run = run.DeepCopy()
	run.UID = ""
	require.NoError(f.t, f.cr.Create(context.Background(), run))
}

// reconcileLosing runs one pass whose k-th status write (from 1) loses a race to
// another writer, and returns the pass's error.
func (f *fixture) reconcileLosing(name string, k int) error {
	writes := f.writes
	f.statusWrite = func(n int) error {
		if n == writes+k {
			return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("stressruns").GroupResource(), name, assert.AnError)
		}
		return nil
	}
	_, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	return err
}

func (f *fixture) reconcile(name string) time.Duration {
	f.t.Helper()
	res, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	require.NoError(f.t, err)
	return res.RequeueAfter
}

func (f *fixture) run(name string) *v1alpha1.StressRun {
	f.t.Helper()
	var run v1alpha1.StressRun
	require.NoError(f.t, f.cr.Get(context.Background(), client.ObjectKey{Name: name}, &run))
	return &run
}

func (f *fixture) pods() []string {
	f.t.Helper()
	list, err := f.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	var out []string
	for _, p := range list.Items {
		if p.Labels[LabelComponent] == Component {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}

// end plays the test image: the pod ends Succeeded, or Failed with exit 1 and msg.
func (f *fixture) end(pod string, msg string) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	require.NoError(f.t, err)
	term := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
	p.Status.Phase = corev1.PodSucceeded
	if msg != "" {
		p.Status.Phase, term.ExitCode, term.Reason, term.Message = corev1.PodFailed, 1, "Error", msg
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "stress", State: corev1.ContainerState{Terminated: term}}}
	_, err = f.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

func (f *fixture) node(name string) *corev1.Node {
	n, err := f.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return n
}

func busyPod(node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team"},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// A run from Pending to Failed: the busy node is skipped, tests run one after the
// other on each node in litepool's namespace, a failing test ends its node's run and
// degrades it, passed pods are deleted once recorded and the failed one is kept.
func TestReconcileRunsTestsNodeByNodeAndJudgesNodes(t *testing.T) {
	f := newFixture(t, readyNode("n1"), readyNode("n2"), readyNode("n3"), busyPod("n3"))
	f.create(testRun())

	f.reconcile("pool-a-1")
	run := f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunRunning, run.Status.Phase)
	assert.Equal(t, ns, run.Status.Namespace)
	assert.Equal(t, int32(2), run.Status.Total)
	assert.Equal(t, int32(1), run.Status.Skipped)
	assert.Equal(t, v1alpha1.StressNodeResult{Node: "n3", Outcome: v1alpha1.StressOutcomeSkipped, Message: "busy: 1 workload pod(s): team/train"}, run.Status.Results[4])
	assert.Empty(t, f.pods(), "the plan is recorded before any pod is created")

	f.reconcile("pool-a-1")
	assert.ElementsMatch(t, []string{ns + "/pool-a-1-n1-npu", ns + "/pool-a-1-n2-npu"}, f.pods(), "first test of each node, nothing outside litepool's namespace")
	f.reconcile("pool-a-1")
	assert.Len(t, f.pods(), 2, "reconciling again creates nothing new")

	f.end("pool-a-1-n1-npu", "")
	f.end("pool-a-1-n2-npu", "npu 3 ecc errors")
	f.reconcile("pool-a-1")
	run = f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressOutcomePassed, run.Status.Results[0].Outcome)
	assert.Equal(t, v1alpha1.StressOutcomeRunning, run.Status.Results[1].Outcome, "n1 goes on with hccs")
	assert.Equal(t, v1alpha1.StressNodeResult{Node: "n2", Test: "npu", Pod: "pool-a-1-n2-npu", Outcome: v1alpha1.StressOutcomeFailed,
		ExitCode: ptrTo(int32(1)), Message: "exit 1 (Error): npu 3 ecc errors", StartTime: run.Status.Results[2].StartTime, FinishTime: run.Status.Results[2].FinishTime}, run.Status.Results[2])
	assert.Equal(t, v1alpha1.StressOutcomeNotRun, run.Status.Results[3].Outcome)
	assert.Equal(t, policy.HealthDegraded, f.node("n2").Labels[policy.LabelHealth])
	assert.Equal(t, "npu,hccs failed at 2026-11-22T12:00:00Z (stress run pool-a-1): npu: exit 1 (Error): npu 3 ecc errors", f.node("n2").Annotations[policy.AnnotationStressResult])
	assert.NotContains(t, f.node("n1").Labels, policy.LabelHealth, "n1 is judged once all its tests ran")
	assert.Contains(t, f.pods(), ns+"/pool-a-1-n1-hccs")

	f.end("pool-a-1-n1-hccs", "")
	f.reconcile("pool-a-1")
	run = f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase)
	assert.Equal(t, []int32{2, 1, 1, 1}, []int32{run.Status.Total, run.Status.Passed, run.Status.Failed, run.Status.Skipped})
	assert.Equal(t, policy.HealthHealthy, f.node("n1").Labels[policy.LabelHealth])
	assert.NotNil(t, run.Status.CompletionTime)
	assert.Equal(t, "1 node(s) failed: n2", run.Status.Conditions[1].Message)

	f.reconcile("pool-a-1")
	assert.Equal(t, []string{ns + "/pool-a-1-n2-npu"}, f.pods(), "passed pods deleted once recorded, the failed one kept")
	reasons := map[string]int{} // from the actions: the fake clientset gives no generated names
	for _, a := range f.kube.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
			reasons[c.GetObject().(*corev1.Event).Reason]++
		}
	}
	assert.Equal(t, map[string]int{"StressTestFailed": 1, "StressTestPassed": 1}, reasons)
}

func ptrTo[T any](v T) *T { return &v }

// One run per pool: a second run waits, Pending, while the first runs, and starts once
// it ended. A run of another pool is not held.
func TestReconcileHoldsASecondRunOfThePool(t *testing.T) {
	f := newFixture(t, readyNode("n1"))
	first := testRun()
	first.Spec.Tests = []v1alpha1.StressTest{"npu"}
	f.create(first)
	f.reconcile("pool-a-1")
	second := first.DeepCopy()
	second.Name = "pool-a-2"
	f.create(second)
	assert.Equal(t, PoolBusyRecheck, f.reconcile("pool-a-2"))
	run := f.run("pool-a-2")
	assert.Equal(t, v1alpha1.StressRunPending, run.Status.Phase)
	assert.Equal(t, "PoolBusy", run.Status.Conditions[0].Reason)
	assert.Equal(t, "stress run pool-a-1 holds pool pool-a: this one starts when it ends", run.Status.Conditions[0].Message)

	f.reconcile("pool-a-1")
	f.end("pool-a-1-n1-npu", "")
	f.reconcile("pool-a-1")
	require.Equal(t, v1alpha1.StressRunSucceeded, f.run("pool-a-1").Status.Phase)
	f.reconcile("pool-a-2")
	assert.Equal(t, v1alpha1.StressRunRunning, f.run("pool-a-2").Status.Phase)
}

// Abort stops a run: running tests are Aborted, their pods deleted, nodes not judged.
func TestReconcileAbort(t *testing.T) {
	f := newFixture(t, readyNode("n1"))
	f.create(testRun())
	f.reconcile("pool-a-1")
	f.reconcile("pool-a-1")
	require.Len(t, f.pods(), 1)
	run := f.run("pool-a-1")
	run.Spec.Abort = true
	require.NoError(t, f.cr.Update(context.Background(), run))
	f.reconcile("pool-a-1")
	run = f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunAborted, run.Status.Phase)
	assert.Equal(t, v1alpha1.StressOutcomeAborted, run.Status.Results[0].Outcome)
	f.reconcile("pool-a-1")
	assert.Empty(t, f.pods())
	assert.NotContains(t, f.node("n1").Labels, policy.LabelHealth)
}

// A test pod that outlives the run's timeout (no kubelet enforced its deadline) fails
// its node, by the reconciler's clock.
func TestReconcileTimesOutATestByTheClock(t *testing.T) {
	f := newFixture(t, readyNode("n1"))
	f.create(testRun())
	f.reconcile("pool-a-1")
	after := f.reconcile("pool-a-1")
	assert.Equal(t, runningRecheck, after)
	f.clock.Step(50 * time.Second)
	assert.Equal(t, 10*time.Second, f.reconcile("pool-a-1"), "looks again at the deadline")
	f.clock.Step(10 * time.Second)
	f.reconcile("pool-a-1")
	run := f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase)
	assert.Equal(t, "did not finish within 1m0s", run.Status.Results[0].Message)
	assert.Equal(t, policy.HealthDegraded, f.node("n1").Labels[policy.LabelHealth])
}

// A pool with no nodes ends the run Failed, saying why; so does a pod the API server
// refuses (the run is not retried for ever).
func TestReconcileFailsARunThatCannotRun(t *testing.T) {
	f := newFixture(t)
	f.create(testRun())
	f.reconcile("pool-a-1")
	run := f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase)
	assert.Equal(t, `pool "pool-a" has no nodes (no node carries runwhere.ai/pool=pool-a)`, run.Status.Conditions[1].Message)

	f = newFixture(t, readyNode("n1"))
	f.kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "x", assert.AnError)
	})
	f.create(testRun())
	f.reconcile("pool-a-1")
	f.reconcile("pool-a-1")
	run = f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase)
	assert.Equal(t, "CannotCreatePods", run.Status.Conditions[1].Reason)
	assert.NotContains(t, f.node("n1").Labels, policy.LabelHealth)
}

// A node is recorded once per run: a step taken again from a stale read (the status
// write of the first one lost) finds the run named on the node and adds no Event.
func TestRecordNodeOncePerRun(t *testing.T) {
	f := newFixture(t, readyNode("n1"))
	ctx := context.Background()
	require.NoError(t, RecordNode(ctx, f.kube, f.r.Recorder, "n1", "r1", "npu failed at T (stress run r1): x", true))
	require.NoError(t, RecordNode(ctx, f.kube, f.r.Recorder, "n1", "r1", "npu failed at T2 (stress run r1): x", true))
	require.NoError(t, RecordNode(ctx, f.kube, f.r.Recorder, "n1", "r2", "npu passed at T3 (stress run r2): exit 0", false))
	events := 0
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "events" {
			events++
		}
	}
	assert.Equal(t, 2, events)
	assert.Equal(t, policy.HealthHealthy, f.node("n1").Labels[policy.LabelHealth])
	assert.Equal(t, "npu passed at T3 (stress run r2): exit 0", f.node("n1").Annotations[policy.AnnotationStressResult])
}

// The plugin's stand-in moves a run on but never answers for a controller: a later
// command reads observedGeneration as "a controller acts on this run".
func TestStandInLeavesObservedGenerationAlone(t *testing.T) {
	for _, standIn := range []bool{false, true} {
		f := newFixture(t, readyNode("n1"))
		f.r.StandIn = standIn
		run := testRun()
		run.Spec.Tests = []v1alpha1.StressTest{"npu"}
		run.Generation = 2
		f.create(run)
		f.reconcile("pool-a-1")
		got := f.run("pool-a-1")
		require.Equal(t, int64(2), got.Generation, "the fake keeps the generation")
		assert.Equal(t, v1alpha1.StressRunRunning, got.Status.Phase, "stand-in %v moves the run on", standIn)
		if standIn {
			assert.Zero(t, got.Status.ObservedGeneration, "a stand-in does not answer for a controller")
		} else {
			assert.Equal(t, got.Generation, got.Status.ObservedGeneration)
		}
	}
}

// events counts the Events created, by reason.
func (f *fixture) events() map[string]int {
	out := map[string]int{}
	for _, a := range f.kube.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
			out[c.GetObject().(*corev1.Event).Reason]++
		}
	}
	return out
}

// oneFailedTest is a run of one test on n1 whose pod has failed: the next pass judges
// n1.
func oneFailedTest(t *testing.T) *fixture {
	f := newFixture(t, readyNode("n1"))
	run := testRun()
	run.Spec.Tests = []v1alpha1.StressTest{"npu"}
	f.create(run)
	f.reconcile("pool-a-1")
	f.reconcile("pool-a-1")
	f.end("pool-a-1-n1-npu", "npu 3 ecc errors")
	return f
}

// A pass whose status write loses a race has told nobody: the node is not labelled
// and no Event says it failed. The retry judges it again and records it once.
func TestAJudgementLostToAConflictIsNotPublished(t *testing.T) {
	f := oneFailedTest(t)
	err := f.reconcileLosing("pool-a-1", 1)
	require.True(t, apierrors.IsConflict(err), "a conflict is returned for the rate limiter, got %v", err)
	assert.NotContains(t, f.node("n1").Labels, policy.LabelHealth)
	assert.Empty(t, f.events())
	assert.Empty(t, f.run("pool-a-1").Status.Judged)

	f.reconcile("pool-a-1")
	f.reconcile("pool-a-1")
	assert.Equal(t, policy.HealthDegraded, f.node("n1").Labels[policy.LabelHealth])
	assert.Equal(t, map[string]int{"StressTestFailed": 1}, f.events())
	run := f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase)
	require.Len(t, run.Status.Judged, 1)
	assert.Equal(t, v1alpha1.StressJudgement{Node: "n1", Health: policy.HealthDegraded, Recorded: true,
		Summary: "npu failed at 2026-11-22T12:00:00Z (stress run pool-a-1): npu: exit 1 (Error): npu 3 ecc errors"}, run.Status.Judged[0])
}

// A pass that ends between its status write and the node's label (here the label's
// patch fails) leaves the verdict owed in the status; the next pass labels the node,
// even though the run has ended, and records it once.
func TestAJudgementStoredIsLabelledOnTheNextPass(t *testing.T) {
	f := oneFailedTest(t)
	failed := false
	f.kube.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failed {
			return false, nil, nil
		}
		failed = true
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	_, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "pool-a-1"}})
	require.Error(t, err)
	run := f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase, "the verdict is stored")
	require.Len(t, run.Status.Judged, 1)
	assert.False(t, run.Status.Judged[0].Recorded)
	assert.NotContains(t, f.node("n1").Labels, policy.LabelHealth)
	assert.Empty(t, f.events())

	f.reconcile("pool-a-1")
	assert.Equal(t, policy.HealthDegraded, f.node("n1").Labels[policy.LabelHealth])
	assert.True(t, f.run("pool-a-1").Status.Judged[0].Recorded)
	f.reconcile("pool-a-1")
	assert.Equal(t, map[string]int{"StressTestFailed": 1}, f.events())
}

// A node labelled whose "recorded" mark was not stored (that write lost a race) is
// found labelled by the next pass, which records no second Event.
func TestARecordedMarkLostIsNotRecordedTwice(t *testing.T) {
	f := oneFailedTest(t)
	err := f.reconcileLosing("pool-a-1", 2)
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	assert.Equal(t, policy.HealthDegraded, f.node("n1").Labels[policy.LabelHealth])
	assert.False(t, f.run("pool-a-1").Status.Judged[0].Recorded)
	f.reconcile("pool-a-1")
	assert.True(t, f.run("pool-a-1").Status.Judged[0].Recorded)
	assert.Equal(t, map[string]int{"StressTestFailed": 1}, f.events())
}

// A test judged failed by the clock is killed only once that is stored: a pass whose
// write is lost leaves the pod running (its retry would otherwise run the test again),
// and the retry kills it and makes no new one.
func TestATimedOutTestIsKilledOnlyOnceItsFailureIsStored(t *testing.T) {
	f := newFixture(t, readyNode("n1"))
	run := testRun()
	run.Spec.Tests = []v1alpha1.StressTest{"npu"}
	f.create(run)
	f.reconcile("pool-a-1")
	f.reconcile("pool-a-1")
	require.Equal(t, []string{ns + "/pool-a-1-n1-npu"}, f.pods())
	f.clock.Step(2 * time.Minute)
	err := f.reconcileLosing("pool-a-1", 1)
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	assert.Equal(t, []string{ns + "/pool-a-1-n1-npu"}, f.pods(), "not killed: the failure is not stored")

	f.reconcile("pool-a-1")
	assert.Empty(t, f.pods(), "killed once the failure is stored")
	got := f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, got.Status.Phase)
	assert.Equal(t, "did not finish within 1m0s", got.Status.Results[0].Message)
	f.reconcile("pool-a-1")
	assert.Empty(t, f.pods(), "and not made again")
}
