package realnode

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	drainNS     = "realnode-drain"
	lingerImage = "litepool.local/linger:e2e"
	grace       = int64(4)
)

// testDrain: `kubectl litepool drain` of a real pod whose process ignores SIGTERM. A PDB
// that allows no disruption stops the drain and the pod keeps running; without it, the
// pod is evicted and the kubelet keeps it running for its whole grace period, then
// kills it (exit 137).
func testDrain(t *testing.T) {
	c := framework.C
	kube := c.Kube
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: drainNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sel := map[string]string{"app": "linger"}
	_, err = kube.AppsV1().Deployments(drainNS).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "linger"},
		Spec: appsv1.DeploymentSpec{Replicas: ptrTo(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
				TerminationGracePeriodSeconds: ptrTo(grace),
				Containers:                    []corev1.Container{{Name: "linger", Image: lingerImage, ImagePullPolicy: corev1.PullNever}},
			}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.PolicyV1().PodDisruptionBudgets(drainNS).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "linger"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptrTo(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: sel}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var pod corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(drainNS).List(ctx, metav1.ListOptions{LabelSelector: "app=linger"})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		pod = pods.Items[0]
		return pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].Ready, nil
	}), "the linger pod never ran: %+v", pod.Status)
	require.Zero(t, pod.Status.ContainerStatuses[0].RestartCount, "the linger container runs until it is killed: %+v", pod.Status.ContainerStatuses[0])
	assert.Equal(t, node, pod.Spec.NodeName)
	defer func() {
		_ = c.Litepool(t, "uncordon", node)
		_ = kube.CoreV1().Namespaces().Delete(ctx, drainNS, metav1.DeleteOptions{})
	}()

	t.Run("the PDB stops the drain", func(t *testing.T) {
		res := c.Litepool(t, "drain", node, "--pod-selector", "app=linger", "--timeout", "10s")
		assert.NotEqual(t, 0, res.ExitCode, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		assert.Contains(t, res.Stdout+res.Stderr, "disruption budget")
		got, err := kube.CoreV1().Pods(drainNS).Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, got.DeletionTimestamp, "the pod was not evicted")
		assert.Equal(t, corev1.PodRunning, got.Status.Phase)
	})

	t.Run("the drain waits for the grace period", func(t *testing.T) {
		require.NoError(t, kube.PolicyV1().PodDisruptionBudgets(drainNS).Delete(ctx, "linger", metav1.DeleteOptions{}))
		w, err := kube.CoreV1().Pods(drainNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
		require.NoError(t, err)
		defer w.Stop()
		// evicted is the pod as the eviction left it (deletionTimestamp: the eviction
		// plus the grace period); last is its final status from the kubelet.
		var evicted, last *corev1.Pod
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range w.ResultChan() {
				if p, ok := ev.Object.(*corev1.Pod); ok {
					if ev.Type == watch.Deleted {
						return
					}
					if evicted == nil && p.DeletionTimestamp != nil {
						evicted = p
					}
					last = p
				}
			}
		}()
		res := c.Litepool(t, "drain", node, "--pod-selector", "app=linger", "--timeout", "2m")
		require.Equal(t, 0, res.ExitCode, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the pod was never deleted")
		}
		require.NotNil(t, evicted)
		require.NotNil(t, evicted.DeletionGracePeriodSeconds)
		assert.Equal(t, grace, *evicted.DeletionGracePeriodSeconds, "evicted with the pod's own grace period")
		require.Len(t, last.Status.ContainerStatuses, 1)
		term := last.Status.ContainerStatuses[0].State.Terminated
		require.NotNil(t, term, "the kubelet reported the container's end: %+v", last.Status.ContainerStatuses[0].State)
		assert.Equal(t, int32(137), term.ExitCode, "SIGTERM was ignored: SIGKILL at the end of the grace period")
		// deletionTimestamp is the eviction plus the grace period: the container ran
		// until then (the API's timestamps have second precision).
		assert.Zero(t, last.Status.ContainerStatuses[0].RestartCount, "the container ran once, from start to SIGKILL")
		assert.False(t, term.FinishedAt.Add(time.Second).Before(evicted.DeletionTimestamp.Time),
			"container finished at %s, before its grace period ended at %s", term.FinishedAt, evicted.DeletionTimestamp)
	})
}
