package health

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// A fatal fault on a node in the middle of its driver install, with drain on: the
// health drain evicts the tenant's pod and leaves the running installer alone (its Job
// has backoff 0: one eviction fails the node's upgrade). kwok completes a Job's pod the
// moment it runs, so the node is one kwok does not play: the test plays its kubelet,
// starting the pods it is given and never ending them.
func TestHealthDrainDuringARolloutLeavesTheInstallerRunning(t *testing.T) {
	r := startController(t)
	healthPool(t, "hl-roll", 4, &v1alpha1.HealthPolicy{Drain: true, MaxQuarantinedPercent: 50})
	ctx := context.Background()
	kube := framework.C.Kube
	n := "hl-roll-own"
	list := corev1.ResourceList{"cpu": resource.MustParse("192"), "memory": resource.MustParse("1Ti"), "pods": resource.MustParse("110"),
		resourceName: resource.MustParse("8")}
	_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n,
		Labels: map[string]string{framework.DriverLabel: "24.1.rc2", policy.LabelGPUType: "Snt9B", policy.LabelPool: "hl-roll", "kubernetes.io/hostname": n}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := framework.Node(t, n)
		cur.Status = corev1.NodeStatus{Allocatable: list, Capacity: list, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady,
			Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
		_, err := kube.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}))

	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "hl-roll"}, Spec: v1alpha1.DriverRolloutSpec{Nodes: []string{n},
		Version: "24.1.rc3", Installer: v1alpha1.DriverInstaller{Image: "registry.example.com/ascend-installer:24.1.rc3"},
		WaitTimeout: &metav1.Duration{}}}
	require.NoError(t, c.Create(ctx, ro))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ro) })

	var installer *corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(localwebhook.Namespace).List(ctx, metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		installer = &pods.Items[0]
		return true, nil
	}), "no installer pod:\n%s", r.Logs.String())
	tenant := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hl-roll-train", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: n, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "train:1"}}}}
	tenant, err = kube.CoreV1().Pods("default").Create(ctx, tenant, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, p := range []*corev1.Pod{tenant, installer} {
			_ = kube.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	})
	run(t, installer)
	run(t, tenant)

	setCondition(t, n, "SysLogsXIDError", corev1.ConditionTrue)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		e := entry(t, "hl-roll", n)
		return e != nil && e.Drained, nil
	}), "the drain never finished: %+v\n%s", entry(t, "hl-roll", n), r.Logs.String())
	p, err := kube.CoreV1().Pods("default").Get(ctx, tenant.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, p.DeletionTimestamp, "the tenant's pod was evicted")
	p, err = kube.CoreV1().Pods(installer.Namespace).Get(ctx, installer.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, p.DeletionTimestamp, "the installer's pod was not evicted")
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
	var got v1alpha1.DriverRollout
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ro), &got))
	require.Len(t, got.Status.Nodes, 1)
	assert.Equal(t, string(policy.UpgradeInstall), got.Status.Nodes[0].State, got.Status.Nodes[0].Message)
}

// run plays the kubelet starting p.
func run(t *testing.T, p *corev1.Pod) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := framework.C.Kube.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.StartTime = &now
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: cur.Spec.Containers[0].Name, Image: cur.Spec.Containers[0].Image,
			Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		_, err = framework.C.Kube.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	}))
}
