package stress

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
)

var runArgs = []string{"run", "--pool", "pool-a", "--image", "stress:1", "--tests", "npu"}

func idleNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "pool-a"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// withRuns gives the command a fake StressRun client; with controller, a "controller"
// observes every run as it is created.
func withRuns(t *testing.T, controller bool, objs ...client.Object) client.Client {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	b := crfake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.StressRun{}).WithObjects(objs...)
	if controller {
		b = b.WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			run := obj.(*v1alpha1.StressRun)
			run.Status.ObservedGeneration, run.Status.Phase = 1, v1alpha1.StressRunPending
			return c.Status().Update(ctx, run)
		}})
	}
	c := b.Build()
	old, oldPoll := newRunsClient, pollInterval
	newRunsClient, pollInterval = func(kit.Factory) (client.Client, error) { return c, nil }, time.Millisecond
	t.Cleanup(func() { newRunsClient, pollInterval = old, oldPoll })
	return c
}

func stressPods(t *testing.T, f *kittest.Factory) []string {
	list, err := f.Kube.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// With a controller, the command creates the StressRun, sees it taken (its
// observedGeneration) and returns: it runs nothing itself.
func TestStressRunCreatesTheRunAndLeavesItToTheController(t *testing.T) {
	f := kittest.NewFactory(t, poolA(), idleNode("n1"))
	runs := withRuns(t, true)
	r := stressCmd(f, runArgs...)
	require.NoError(t, r.Err)
	assert.Equal(t, "stressrun/pool-a-20261122-120000 created\nstress run pool-a-20261122-120000: taken by litepool's controller; follow it with kubectl get stressrun pool-a-20261122-120000 -w, or kubectl litepool stress run ... --wait\n", r.Out)
	var run v1alpha1.StressRun
	require.NoError(t, runs.Get(t.Context(), client.ObjectKey{Name: "pool-a-20261122-120000"}, &run))
	assert.Equal(t, v1alpha1.StressRunSpec{Pool: "pool-a", Image: "stress:1", Tests: []v1alpha1.StressTest{"npu"},
		Timeout: &metav1.Duration{Duration: 30 * time.Minute}}, run.Spec)
	assert.Empty(t, stressPods(t, f), "the controller runs the pods, not the plugin")

	// A second run while that one is unfinished is refused.
	f.Clocks.Step(time.Second)
	r = stressCmd(f, runArgs...)
	require.EqualError(t, r.Err, `pool pool-a: stress run pool-a-20261122-120000 is pending in the cluster: wait until it ends (kubectl get stressrun pool-a-20261122-120000), or abort it (kubectl patch stressrun pool-a-20261122-120000 --type merge -p '{"spec":{"abort":true}}')`)
}

// With no controller, the command runs the same reconciler on the same object until
// the run ends, in litepool's namespace, and says so.
func TestStressRunRunsItHereWithoutAController(t *testing.T) {
	f := kittest.NewFactory(t, poolA(), idleNode("n1"), idleNode("n2"))
	runs := withRuns(t, false)
	f.Kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Status.Phase = corev1.PodSucceeded // the image plays a passing test
		if p.Spec.NodeName == "n2" {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Message: "ecc"}}}}
		}
		return false, nil, nil
	})
	r := stressCmd(f, append(runArgs, "--controller-wait=10ms")...)
	require.EqualError(t, r.Err, "[T2] 1 node(s) failed the stress test and are now runwhere.ai/health=degraded: n2")
	assert.Contains(t, r.ErrOut, "stress run pool-a-20261122-120000: no litepool controller took it within 10ms: running it in this process; stopping this command leaves it for a controller to finish\n")
	assert.Contains(t, r.Out, "NODE   TEST   RESULT   DETAIL\nn1     npu    passed   exit 0\nn2     npu    failed   exit 2: ecc\n")
	assert.Contains(t, r.ErrOut, "pool pool-a: 1 passed, 1 failed, 0 skipped\n")
	var run v1alpha1.StressRun
	require.NoError(t, runs.Get(t.Context(), client.ObjectKey{Name: "pool-a-20261122-120000"}, &run))
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase)
	require.NotNil(t, run.Status.StartTime)
	assert.Equal(t, "2026-11-22T12:00:00Z", run.Status.StartTime.UTC().Format(time.RFC3339), "the run here is stamped with the command's clock")
	assert.Equal(t, []string{stress.DefaultNamespace + "/pool-a-20261122-120000-n2-npu"}, stressPods(t, f), "only litepool's namespace; the passed pod deleted")
	assert.Equal(t, policy.HealthDegraded, f.Node(t, "n2").Labels[policy.LabelHealth])
}

// --in-cluster=true never runs a run here: no controller, an error naming the run.
func TestStressRunInClusterWaitsForAController(t *testing.T) {
	f := kittest.NewFactory(t, poolA(), idleNode("n1"))
	withRuns(t, false)
	r := stressCmd(f, append(runArgs, "--in-cluster=true", "--controller-wait=10ms")...)
	require.EqualError(t, r.Err, "--in-cluster: no litepool controller took stress run pool-a-20261122-120000 within 10ms; it stays Pending until one does (kubectl delete stressrun pool-a-20261122-120000 drops it)")
	assert.Empty(t, stressPods(t, f))
}

// A client dry run prints the plan and creates nothing.
func TestStressRunDryRun(t *testing.T) {
	busy := idleNode("n2")
	busy.Spec.Unschedulable = true
	f := kittest.NewFactory(t, poolA(), idleNode("n1"), busy)
	runs := withRuns(t, false)
	r := stressCmd(f, append(runArgs, "--dry-run=client")...)
	require.NoError(t, r.Err)
	assert.Equal(t, "NODE   TEST     RESULT       DETAIL\nn1     npu      would test   <none>\nn2     <none>   skipped      cordoned\n", r.Out)
	var list v1alpha1.StressRunList
	require.NoError(t, runs.List(t.Context(), &list))
	assert.Empty(t, list.Items)
	assert.Empty(t, stressPods(t, f))
}

// withFinishingController gives the command a fake StressRun client whose "controller"
// takes every run as it is created and ends it passed on n1.
func withFinishingController(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := crfake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.StressRun{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			run := obj.(*v1alpha1.StressRun)
			run.Status = v1alpha1.StressRunStatus{ObservedGeneration: 1, Phase: v1alpha1.StressRunSucceeded, Total: 1, Passed: 1,
				Results: []v1alpha1.StressNodeResult{{Node: "n1", Test: "npu", Outcome: v1alpha1.StressOutcomePassed, Message: "exit 0"}}}
			return c.Status().Update(ctx, run)
		}}).Build()
	old, oldPoll := newRunsClient, pollInterval
	newRunsClient, pollInterval = func(kit.Factory) (client.Client, error) { return c, nil }, time.Millisecond
	t.Cleanup(func() { newRunsClient, pollInterval = old, oldPoll })
}

// controllerLease is litepool's controller's leader Lease, last renewed at renewed.
func controllerLease(renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kit.ControllerLease, Namespace: "litepool-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-1"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: renewed}}}
}

// -w is --watch, as in kubectl get and upgrade: it follows the run (it implies --wait,
// so scripts that wrote -w for --wait still follow it) and prints its moves; --wait
// alone follows it quietly to its results.
func TestStressRunDashWIsWatch(t *testing.T) {
	const results = "NODE   TEST   RESULT   DETAIL\nn1     npu    passed   exit 0\n"
	for _, tc := range []struct {
		name, flags, out, err string
	}{
		{"-w", "-w", "stressrun/pool-a-20261122-120000 created\nstress run pool-a-20261122-120000: succeeded\n" + results, ""},
		{"--watch", "--watch", "stressrun/pool-a-20261122-120000 created\nstress run pool-a-20261122-120000: succeeded\n" + results, ""},
		{"--wait", "--wait", "stressrun/pool-a-20261122-120000 created\n" + results, ""},
		{"--watch --wait=false", "--watch --wait=false", "", "--watch (-w) prints the moves of a run it follows: it does not go with --wait=false"},
		{"-w with a dry run", "-w --dry-run=client", "", "--watch (-w) follows a stress run, and a dry run starts none"},
		{"--wait with a dry run", "--wait --dry-run=client", "", "--wait follows a stress run, and a dry run starts none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kittest.NewFactory(t, poolA(), idleNode("n1"), controllerLease(kittest.Now))
			withFinishingController(t)
			r := stressCmd(f, append(runArgs, strings.Fields(tc.flags)...)...)
			if tc.err != "" {
				require.EqualError(t, r.Err, tc.err)
				return
			}
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Equal(t, "pool pool-a: 1 passed, 0 failed, 0 skipped\n", r.ErrOut)
		})
	}
}

// A controller took the run and then stopped (its leader Lease expired): the command
// that follows the run says so and runs it to its end with the same reconciler, as
// upgrade does, instead of following a run nothing moves. With --in-cluster it says
// so and keeps waiting.
func TestStressRunTakesOverWhenTheControllerStops(t *testing.T) {
	passing := func(f *kittest.Factory) {
		f.Kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).Status.Phase = corev1.PodSucceeded
			return false, nil, nil
		})
	}
	f := kittest.NewFactory(t, poolA(), idleNode("n1"), controllerLease(kittest.Now.Add(-time.Minute)))
	passing(f)
	withRuns(t, true)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	r := kittest.RunContext(ctx, f, NewCmdStressRun, "", append(runArgs[1:], "-w", "--in-cluster")...)
	assert.ErrorIs(t, r.Err, context.DeadlineExceeded, "--in-cluster waits for a controller")
	assert.Equal(t, "stress run pool-a-20261122-120000: no litepool controller has renewed Lease litepool-system/litepool-controller within its 15s; it waits for one (--in-cluster)\n", r.ErrOut)
	assert.Empty(t, stressPods(t, f))

	f = kittest.NewFactory(t, poolA(), idleNode("n1"), controllerLease(kittest.Now.Add(-time.Minute)))
	passing(f)
	runs := withRuns(t, true)
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r = kittest.RunContext(ctx, f, NewCmdStressRun, "", append(runArgs[1:], "-w")...)
	require.NoError(t, r.Err, r.ErrOut)
	assert.Equal(t, "stress run pool-a-20261122-120000: no litepool controller has renewed Lease litepool-system/litepool-controller within its 15s: running it in this process from here; stopping this command leaves it for a controller to finish\n"+
		"pool pool-a: 1 passed, 0 failed, 0 skipped\n", r.ErrOut)
	assert.Contains(t, r.Out, "NODE   TEST   RESULT   DETAIL\nn1     npu    passed   exit 0\n")
	var run v1alpha1.StressRun
	require.NoError(t, runs.Get(t.Context(), client.ObjectKey{Name: "pool-a-20261122-120000"}, &run))
	assert.Equal(t, v1alpha1.StressRunSucceeded, run.Status.Phase)
	assert.Equal(t, policy.HealthHealthy, f.Node(t, "n1").Labels[policy.LabelHealth])
}

// --controller-wait, this command's name for --controller-timeout before the two
// commands shared one mechanism, still sets it.
func TestStressRunControllerWaitIsControllerTimeout(t *testing.T) {
	f := kittest.NewFactory(t, poolA(), idleNode("n1"))
	withRuns(t, false)
	r := stressCmd(f, append(runArgs, "--in-cluster=true", "--controller-wait=10ms")...)
	require.EqualError(t, r.Err, "--in-cluster: no litepool controller took stress run pool-a-20261122-120000 within 10ms; it stays Pending until one does (kubectl delete stressrun pool-a-20261122-120000 drops it)")
	f.Clocks.Step(time.Second)
	r = stressCmd(f, append(runArgs, "--in-cluster=true", "--controller-timeout=20ms")...)
	require.EqualError(t, r.Err, "pool pool-a: stress run pool-a-20261122-120000 is pending in the cluster: wait until it ends (kubectl get stressrun pool-a-20261122-120000), or abort it (kubectl patch stressrun pool-a-20261122-120000 --type merge -p '{\"spec\":{\"abort\":true}}')")
}

// A controller stores a run's phase first and labels its nodes after: one who follows
// the run with --wait reports it, T2's "now degraded" included, only once every judged
// node is recorded, not at the first read of the phase.
func TestStressRunWaitReportsOnceTheNodesAreRecorded(t *testing.T) {
	f := kittest.NewFactory(t, poolA(), idleNode("n1"), controllerLease(kittest.Now))
	runs := withRuns(t, true)
	const name = "pool-a-20261122-120000"
	reads := 0
	failed := func(recorded bool) {
		var run v1alpha1.StressRun
		require.NoError(t, runs.Get(t.Context(), client.ObjectKey{Name: name}, &run))
		run.Status.Phase = v1alpha1.StressRunFailed
		run.Status.Total, run.Status.Failed = 1, 1
		run.Status.Results = []v1alpha1.StressNodeResult{{Node: "n1", Test: "npu", Outcome: v1alpha1.StressOutcomeFailed, ExitCode: ptr.To[int32](1)}}
		run.Status.Judged = []v1alpha1.StressJudgement{{Node: "n1", Health: policy.HealthDegraded, Summary: "npu failed", Recorded: recorded}}
		require.NoError(t, runs.Status().Update(t.Context(), &run))
	}
	old := newRunsClient
	newRunsClient = func(kit.Factory) (client.Client, error) {
		return interceptor.NewClient(runs.(client.WithWatch), interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.StressRun); ok && key.Name == name {
				reads++
				switch reads {
				case 3:
					failed(false) // the phase is stored; n1 is not labelled yet
				case 10:
					failed(true)
				}
			}
			return c.Get(ctx, key, obj, opts...)
		}}), nil
	}
	t.Cleanup(func() { newRunsClient = old })

	r := stressCmd(f, append(runArgs, "--wait")...)
	require.EqualError(t, r.Err, "[T2] 1 node(s) failed the stress test and are now runwhere.ai/health=degraded: n1")
	assert.Equal(t, 10, reads, "followed until the nodes were recorded, then stopped")
}
