package nodejob

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

const ns = "litepool-system"

func spec(uid, node, key string) Spec {
	owner := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: types.UID(uid)}}
	return Spec{Owner: owner, OwnerKind: v1alpha1.GroupVersion.WithKind("DriverRollout"), Node: node, Purpose: "driver-installer",
		Key: key, Image: "registry.example.com/installer:1", Command: []string{"/install"}, HostAccess: true,
		Timeout: time.Minute, Approved: []string{"registry.example.com/installer"}, ApprovedBy: "the DriverRollout"}
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestNameIsDeterministicBoundedAndDistinct(t *testing.T) {
	a := Name(spec("u1", "n1", "1"))
	assert.Equal(t, a, Name(spec("u1", "n1", "1")), "the same work has the same name")
	for _, other := range []Spec{spec("u2", "n1", "1"), spec("u1", "n2", "1"), spec("u1", "n1", "2")} {
		assert.NotEqual(t, a, Name(other))
	}
	purpose := spec("u1", "n1", "1")
	purpose.Purpose = "remediation"
	assert.NotEqual(t, a, Name(purpose))
	for _, node := range []string{strings.Repeat("a", 300), "GPU_Node.01.example.com", "-.-", "n1"} {
		n := Name(spec("u1", node, "1"))
		assert.LessOrEqual(t, len(n), 63, n)
		assert.Regexp(t, dnsLabel, n)
	}
}

func TestJobIsOwnedBoundedAndMountsNoToken(t *testing.T) {
	s := spec("u1", "n1", "1")
	s.Accelerators = corev1.ResourceList{"nvidia.com/gpu": *resourceQty(8)}
	j := Job(s, ns, time.Hour)
	ref := metav1.GetControllerOf(j)
	require.NotNil(t, ref)
	assert.Equal(t, types.UID("u1"), ref.UID)
	assert.Equal(t, "DriverRollout", ref.Kind)
	assert.Equal(t, int32(0), *j.Spec.BackoffLimit)
	assert.Equal(t, int32(3600), *j.Spec.TTLSecondsAfterFinished)
	assert.Equal(t, int64(60), *j.Spec.ActiveDeadlineSeconds)
	p := j.Spec.Template.Spec
	assert.Equal(t, ptr.To(false), p.AutomountServiceAccountToken)
	assert.Equal(t, "n1", p.NodeName)
	assert.True(t, p.HostPID)
	assert.True(t, *p.Containers[0].SecurityContext.Privileged)
	assert.Equal(t, "/", p.Volumes[0].HostPath.Path)
	assert.Equal(t, "8", ptr.To(p.Containers[0].Resources.Limits["nvidia.com/gpu"]).String())
	s.HostAccess = false
	p = Job(s, ns, time.Hour).Spec.Template.Spec
	assert.False(t, p.HostPID)
	assert.Nil(t, p.Containers[0].SecurityContext)
	assert.Empty(t, p.Volumes)
}

func TestEnsureChecksTheImageThenMakesOneJob(t *testing.T) {
	ctx := context.Background()
	kube := kubefake.NewClientset()
	r := &Runner{Kube: kube, Namespace: ns}

	evil := spec("u1", "n1", "1")
	evil.Image = "registry.example.com/installer-evil/miner:1"
	_, err := r.Ensure(ctx, evil)
	require.Error(t, err)
	assert.True(t, IsNotApproved(err))
	assert.Equal(t, "the driver-installer image registry.example.com/installer-evil/miner:1 is not among the images the operator approved (the DriverRollout)", err.Error())
	jobs, _ := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	assert.Empty(t, jobs.Items, "nothing is made for an image the operator did not approve")

	a, err := r.Ensure(ctx, spec("u1", "n1", "1"))
	require.NoError(t, err)
	b, err := r.Ensure(ctx, spec("u1", "n1", "1"))
	require.NoError(t, err)
	assert.Equal(t, a.Name, b.Name)
	jobs, _ = kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	assert.Len(t, jobs.Items, 1, "the second Ensure finds the first Job")

	// A Job of the same name that another owner controls is not taken for ours.
	foreign := Job(spec("u2", "n1", "1"), ns, time.Hour)
	foreign.Name = Name(spec("u3", "n1", "1"))
	_, err = kube.BatchV1().Jobs(ns).Create(ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = r.Ensure(ctx, spec("u3", "n1", "1"))
	var fe *ForeignError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, err.Error(), "belongs to DriverRollout ro (uid u2)")
}

func TestOutcomeOf(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: ns}}
	assert.Equal(t, Outcome{Phase: NoPod, Message: "job litepool-system/j has no pod yet: `kubectl -n litepool-system describe job j` says why if it stays so"}, OutcomeOf(job, nil))

	pending := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-abc"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}}}
	assert.Equal(t, Outcome{Phase: NoPod, Message: "job litepool-system/j has not started: pod j-abc is Pending: ImagePullBackOff no such image"}, OutcomeOf(job, []corev1.Pod{pending}))

	running := pending
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	assert.Equal(t, Running, OutcomeOf(job, []corev1.Pod{running}).Phase)

	failed := pending
	failed.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "no driver\n"}}}}}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	assert.Equal(t, Outcome{Phase: Failed, ExitCode: ptr.To[int32](3),
		Message: "job litepool-system/j failed: BackoffLimitExceeded Job has reached the specified backoff limit; exit 3 (Error): no driver"}, OutcomeOf(job, []corev1.Pod{failed}))

	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	assert.Equal(t, Succeeded, OutcomeOf(job, nil).Phase)
}

func TestIsNodeWorkTrustsTheNamespaceNotTheLabels(t *testing.T) {
	job := Job(spec("u1", "n1", "1"), ns, time.Hour)
	pod := func(namespace string, owner *metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespace, Labels: job.Spec.Template.Labels}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	jobRef := metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	runRef := metav1.NewControllerRef(&v1alpha1.StressRun{ObjectMeta: metav1.ObjectMeta{Name: "r", UID: "r1"}}, v1alpha1.GroupVersion.WithKind("StressRun"))
	assert.True(t, IsNodeWork(pod(ns, jobRef), ns), "an installer's pod")
	assert.True(t, IsNodeWork(pod(ns, runRef), ns), "a stress test's pod")
	assert.False(t, IsNodeWork(pod("tenant", jobRef), ns), "a tenant's pod that copies the labels and names a Job")
	assert.False(t, IsNodeWork(pod(ns, nil), ns), "no controller")
	assert.False(t, IsNodeWork(pod(ns, &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", Controller: ptr.To(true)}), ns))
	assert.False(t, IsNodeWork(pod("", jobRef), ""), "no namespace known: nothing is node work")
}

func resourceQty(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

// Every node-work pod, Job or bare, pulls with the operator's Secrets, and with none when
// the operator set none: nothing in the Spec (which owners fill from their objects) adds one.
func TestPodsPullWithTheOperatorsSecretsOnly(t *testing.T) {
	s := spec("u1", "n1", "1")
	assert.Empty(t, Job(s, ns, time.Hour).Spec.Template.Spec.ImagePullSecrets)
	assert.Empty(t, Pod(s, ns).Spec.ImagePullSecrets)

	PullSecrets = []string{"regcred", "mirror"}
	t.Cleanup(func() { PullSecrets = nil })
	want := []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}
	assert.Equal(t, want, Job(s, ns, time.Hour).Spec.Template.Spec.ImagePullSecrets)
	assert.Equal(t, want, Pod(s, ns).Spec.ImagePullSecrets)
}
