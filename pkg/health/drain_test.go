package health

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// A health drain during a driver rollout evicts the tenant's pods and leaves the
// node's running installer alone (its Job has backoff 0: an eviction would fail the
// node's upgrade). A tenant's pod that copies the installer's labels and owner
// reference is not taken for one: it is not in litepool's namespace.
func TestHealthDrainLeavesTheInstallerRunning(t *testing.T) {
	r, kube := setup(t, nil, member("n1", "8"))
	ctx := context.Background()
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "ro-uid"},
		Spec: v1alpha1.DriverRolloutSpec{Version: "2", Installer: v1alpha1.DriverInstaller{Image: "inst:2"}}}
	job := upgrade.InstallerJob(ro, r.Namespace, "n1", 1, time.Minute)
	job.UID = "job-uid"
	// What the Job controller makes of the template.
	podOf := func(namespace, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Spec: job.Spec.Template.Spec, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	installer := podOf(r.Namespace, job.Name+"-abcde")
	lookalike := podOf("tenant", "looks-like-an-installer")
	train := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "tenant"},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, p := range []*corev1.Pod{installer, lookalike, train} {
		_, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.True(t, nodejob.IsNodeWork(installer, r.Namespace))

	refused, err := r.drain(ctx, "n1")
	require.NoError(t, err)
	assert.False(t, refused)
	var evicted []string
	var left []corev1.Pod
	for _, a := range kube.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "eviction" {
			evicted = append(evicted, c.GetNamespace()+"/"+c.GetObject().(metav1.Object).GetName())
		}
	}
	assert.ElementsMatch(t, []string{"tenant/looks-like-an-installer", "tenant/train"}, evicted)
	left, err = r.workloadPods(ctx, "n1")
	require.NoError(t, err)
	assert.Len(t, left, 2, "the installer is not a workload the drain waits for")
}

// A drain a disruption budget refuses asks again after RefusedRetry (nothing that frees
// the budget wakes the loop); one whose evictions went waits for its pods' changes.
func TestARefusedHealthDrainAsksAgainSoon(t *testing.T) {
	r, kube := setup(t, nil, member("n1", "8"))
	ctx := context.Background()
	train := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "tenant"},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	_, err := kube.CoreV1().Pods("tenant").Create(ctx, train, metav1.CreateOptions{})
	require.NoError(t, err)
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewTooManyRequests("the budget allows no disruption", 0)
	})
	st := &Step{Node: "n1", HealthStep: policy.HealthStep{Entry: &v1alpha1.NodeHealthStatus{Node: "n1"}, Taint: true,
		Action: policy.ActionDrain, Requeue: policy.DrainRecheck}}
	require.NoError(t, r.apply(ctx, &v1alpha1.Pool{}, policy.HealthSettings{Enabled: true, Drain: true}, st))
	assert.Equal(t, RefusedRetry, st.Requeue)

	kube.ReactionChain = kube.ReactionChain[1:]
	st.Requeue = policy.DrainRecheck
	require.NoError(t, r.apply(ctx, &v1alpha1.Pool{}, policy.HealthSettings{Enabled: true, Drain: true}, st))
	assert.Equal(t, policy.DrainRecheck, st.Requeue, "an eviction that went: the pod's going wakes the loop")
}
