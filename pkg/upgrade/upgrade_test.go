package upgrade

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

func testNode(name string, ann map[string]string, unschedulable bool) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann, Labels: map[string]string{policy.LabelPool: "p"}},
		Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

var testRun = policy.UpgradeRun{ID: "r1", Pool: "p", Target: "24.1.0.3", InstallerImage: "inst:1", Namespace: "kube-system",
	MaxUnavailable: "1", ValidateTimeout: "1s"}

func TestMarkRefusesNodesInAnotherRollout(t *testing.T) {
	kube := fake.NewSimpleClientset(
		testNode("a", nil, false),
		testNode("b", map[string]string{policy.AnnotationUpgradeState: "drain", policy.AnnotationUpgradeTarget: "23.0.6"}, true),
	)
	u := &Upgrader{Kube: kube}
	err := u.Mark(context.Background(), []string{"a", "b"}, testRun, cmdutil.DryRunNone)
	assert.EqualError(t, err, "[U4] node \"b\" is already in a driver upgrade (state drain, target 23.0.6): finish it with `kubectl litepool upgrade resume` or stop it with `kubectl litepool upgrade abort` first")
	a, _ := kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	assert.Empty(t, a.Annotations[policy.AnnotationUpgradeState], "a refused mark changes nothing")

	require.NoError(t, u.Mark(context.Background(), []string{"a"}, testRun, cmdutil.DryRunNone))
	a, _ = kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	assert.Equal(t, "upgrade-required", a.Annotations[policy.AnnotationUpgradeState])
	assert.Equal(t, "r1", RunID(a))
}

func TestAdvanceTestsTheCurrentState(t *testing.T) {
	n := testNode("a", map[string]string{policy.AnnotationUpgradeState: "install"}, true)
	kube := fake.NewSimpleClientset(n)
	u := &Upgrader{Kube: kube}
	// Another plugin moved it on meanwhile: the JSON patch's test fails.
	err := u.advance(context.Background(), n, policy.UpgradeDrain, policy.UpgradeInstall, "")
	assert.EqualError(t, err, "[U1] node a left state drain for \"install\" while this plugin worked on it (another `upgrade resume` or `abort`?)")
	assert.EqualError(t, u.advance(context.Background(), n, policy.UpgradeInstall, policy.UpgradeDone, ""),
		`[U1] a node cannot go from upgrade state "install" to "done": states follow upgrade-required → cordon → wait-for-jobs → drain → install → validate → uncordon → done, any step may fail, and a failed node is re-marked upgrade-required`)
	require.NoError(t, u.advance(context.Background(), n, policy.UpgradeInstall, policy.UpgradeValidate, "ok"))
	got, _ := kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	assert.Equal(t, "validate", got.Annotations[policy.AnnotationUpgradeState])
	assert.Equal(t, "ok", got.Annotations[policy.AnnotationUpgradeMessage])
}

// A rollout interrupted right after Uncordon (which drops was-cordoned) and before the
// state moved to done must not uncordon a node someone else had cordoned.
func TestRepeatedUncordonStepKeepsAForeignCordon(t *testing.T) {
	n := testNode("a", map[string]string{policy.AnnotationUpgradeState: "uncordon", policy.AnnotationUpgradeRun: testRun.Encode(),
		policy.AnnotationWasCordoned: "true"}, true)
	kube := fake.NewSimpleClientset(n)
	u := &Upgrader{Kube: kube}
	msg, err := u.step(context.Background(), testRun, n, policy.UpgradeUncordon)
	require.NoError(t, err)
	assert.Equal(t, "stays cordoned: it was cordoned before the upgrade", msg)
	again, _ := kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	assert.True(t, again.Spec.Unschedulable)
	assert.NotContains(t, again.Annotations, policy.AnnotationWasCordoned)
	// The step again, as after an interruption: still cordoned.
	_, err = u.step(context.Background(), testRun, again, policy.UpgradeUncordon)
	require.NoError(t, err)
	again, _ = kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	assert.True(t, again.Spec.Unschedulable)
}

func TestValidateTimesOutWithTheLabelItSaw(t *testing.T) {
	n := testNode("a", nil, true)
	n.Labels["nvidia.com/cuda.driver-version.full"] = "535.104.05"
	u := &Upgrader{Kube: fake.NewSimpleClientset(n), Poll: 10 * time.Millisecond}
	_, err := u.validate(context.Background(), testRun, "a", 50*time.Millisecond)
	assert.EqualError(t, err, `validation timed out after 50ms: the node's driver-version label reads "535.104.05", want "24.1.0.3" (labels huawei.com/driver.version, nvidia.com/cuda.driver-version.full, runwhere.ai/driver-version)`)
}

func TestRolloutStopsOnAFailedNode(t *testing.T) {
	run := testRun
	kube := fake.NewSimpleClientset(
		testNode("a", map[string]string{policy.AnnotationUpgradeState: "done", policy.AnnotationUpgradeRun: run.Encode()}, false),
		testNode("b", map[string]string{policy.AnnotationUpgradeState: "failed", policy.AnnotationUpgradeRun: run.Encode(),
			policy.AnnotationUpgradeMessage: "failed in install: boom"}, true),
		testNode("c", map[string]string{policy.AnnotationUpgradeState: "upgrade-required", policy.AnnotationUpgradeRun: run.Encode()}, false),
	)
	var out bytes.Buffer
	u := &Upgrader{Kube: kube, Progress: &out}
	err := u.Rollout(context.Background(), run, nil)
	assert.ErrorIs(t, err, ErrFailed)
	assert.EqualError(t, err, "driver upgrade failed: rollout r1 stopped, 1/3 done; failed node b: failed in install: boom; the failed node stays cordoned: fix it, then `kubectl litepool upgrade resume --pool p --retry-failed`")
	c, _ := kube.CoreV1().Nodes().Get(context.Background(), "c", metav1.GetOptions{})
	assert.Equal(t, "upgrade-required", c.Annotations[policy.AnnotationUpgradeState], "nothing starts after a failure")
	assert.False(t, c.Spec.Unschedulable)
}

func TestInstallerJob(t *testing.T) {
	run := testRun
	run.InstallerCommand = []string{"/install.sh", "--quiet"}
	job := InstallerJob(run, "Node_A.example", 90*time.Second)
	assert.Equal(t, InstallerJobName(run, "Node_A.example"), job.Name)
	assert.Regexp(t, `^litepool-driver-node-a-example-[0-9a-f]{8}$`, job.Name)
	other := run
	other.Target = "24.1.0.6"
	assert.NotEqual(t, InstallerJobName(other, "Node_A.example"), job.Name, "another target, another Job")
	other = run
	other.ID = "r2"
	assert.NotEqual(t, InstallerJobName(other, "Node_A.example"), job.Name, "another rollout, another Job")
	assert.Equal(t, "r1", job.Annotations[AnnotationJobRollout])
	pod := job.Spec.Template.Spec
	assert.Equal(t, "Node_A.example", pod.NodeName)
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, pod.Tolerations)
	assert.Equal(t, []string{"/install.sh", "--quiet"}, pod.Containers[0].Command)
	assert.Equal(t, corev1.EnvVar{Name: "DRIVER_VERSION", Value: "24.1.0.3"}, pod.Containers[0].Env[0])
	assert.Equal(t, int64(90), *job.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, int32(0), *job.Spec.BackoffLimit)
	long := InstallerJobName(run, "a-very-long-node-name-that-goes-on-and-on-and-on-and-on-forever.example.com")
	assert.LessOrEqual(t, len(long), 63)
}

// completeJobsOnCreate makes the fake API server finish every Job it creates.
func completeJobsOnCreate(kube *fake.Clientset) {
	kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		job := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		return false, nil, nil
	})
}

// A finished installer Job of an earlier rollout (same node, same target) is never taken
// for the new rollout's: the new rollout runs its own installer.
func TestNewRolloutNeverReusesAnEarlierRolloutsJob(t *testing.T) {
	earlier := testRun
	failed := InstallerJob(earlier, "a", time.Minute)
	failed.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	kube := fake.NewSimpleClientset(failed)
	completeJobsOnCreate(kube)
	u := &Upgrader{Kube: kube, Poll: time.Millisecond}

	next := testRun
	next.ID = "r2"
	msg, err := u.install(context.Background(), next, "a", time.Minute)
	require.NoError(t, err, "the earlier rollout's failed Job must not fail the new one")
	assert.Equal(t, "installer job "+InstallerJobName(next, "a")+" completed", msg)
	job, err := kube.BatchV1().Jobs("kube-system").Get(context.Background(), InstallerJobName(next, "a"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "r2", job.Annotations[AnnotationJobRollout])
}

// A Job of the same name that does not say it is this rollout's (left by an older
// plugin) is replaced, not reused.
func TestJobOfAnotherRolloutUnderTheSameNameIsReplaced(t *testing.T) {
	stale := InstallerJob(testRun, "a", time.Minute)
	delete(stale.Annotations, AnnotationJobRollout)
	stale.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
	kube := fake.NewSimpleClientset(stale)
	completeJobsOnCreate(kube)
	u := &Upgrader{Kube: kube, Poll: time.Millisecond}
	_, err := u.install(context.Background(), testRun, "a", time.Minute)
	require.NoError(t, err)
	job, err := kube.BatchV1().Jobs("kube-system").Get(context.Background(), InstallerJobName(testRun, "a"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "r1", job.Annotations[AnnotationJobRollout])
}
