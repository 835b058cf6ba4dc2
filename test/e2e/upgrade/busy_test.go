package upgrade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// A node running work: the upgrade waits --wait-timeout for the selected pods, then the
// drain evicts them (their ReplicaSet re-creates them, Pending while the node is
// cordoned, and they come back once it is uncordoned).
func TestUpgradeWaitsForWorkThenDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nodes := framework.AscendPool(t, "upg-busy", 1, oldDriver, software)
	startAgent(0, false, nodes...)
	one := int32(1)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "upg-busy-train", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "upg-busy-train"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "upg-busy-train"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/hostname": nodes[0]},
					Containers:   []corev1.Container{{Name: "train", Image: "train:1"}},
				},
			},
		},
	}
	_, err := framework.C.Kube.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{})
	require.NoError(t, err)
	var first string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := framework.C.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=upg-busy-train"})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false, err
		}
		first = pods.Items[0].Name
		return true, nil
	}))

	r := framework.C.Litepool(t, "upgrade", "driver", "--node", nodes[0], "--version", target, "--installer-image", installer,
		"--wait-selector", "app=upg-busy-train", "--wait-timeout", "3s", "--yes")
	require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	assert.Contains(t, eventMessages(t, nodes[0], "DriverUpgrade"), "driver upgrade to 24.1.0.3 (rollout "+rolloutOf(t, "upg-busy").Name+
		"): wait-for-jobs done, next drain: 1 workload pod(s) still running after 3s (default/"+first+"): the drain evicts them")
	assert.Equal(t, "done", framework.UpgradeState(t, nodes[0]))

	_, err = framework.C.Kube.CoreV1().Pods("default").Get(ctx, first, metav1.GetOptions{})
	assert.Error(t, err, "the drain evicted the training pod")
	// Its replacement runs on the node again once it is uncordoned.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := framework.C.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=upg-busy-train"})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Name != first && pods.Items[0].Spec.NodeName == nodes[0], err
	}))
}
