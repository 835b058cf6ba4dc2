package health

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// A fatal condition with drain on: the node is quarantined and drained through the
// Eviction API; a PodDisruptionBudget that allows no disruption holds the drain until
// it is lifted, and then the pod goes.
func TestFatalFaultDrainsHonouringAPDB(t *testing.T) {
	r := startController(t)
	nodes := healthPool(t, "hl-drain", 4, &v1alpha1.HealthPolicy{Drain: true, HoldTime: seconds(2), MaxQuarantinedPercent: 50})
	n := nodes[0]
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hl-drain-train", Namespace: "default", Labels: map[string]string{"app": "hl-drain-train"}},
		Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "c", Image: "train:1"}}}}
	_, err := framework.C.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "hl-drain-train", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrInt(1), Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}}}
	_, err = framework.C.Kube.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		p, err := framework.C.Kube.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "hl-drain-train", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1, nil
	}), "the PDB never counted the pod")

	setCondition(t, n, "SysLogsXIDError", corev1.ConditionTrue)
	e := waitState(t, r, "hl-drain", n, v1alpha1.NodeHealthDraining)
	assert.True(t, e.Fatal)
	waitTaint(t, n, true)
	time.Sleep(3 * time.Second) // a negative: the PDB allows no disruption
	_, err = framework.C.Kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err, "the PDB holds the pod")
	assert.Equal(t, v1alpha1.NodeHealthDraining, stateOf(t, "hl-drain", n))

	require.NoError(t, framework.C.Kube.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, pdb.Name, metav1.DeleteOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		p, err := framework.C.Kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil), nil
	}), "the pod was never evicted")
	e = waitState(t, r, "hl-drain", n, v1alpha1.NodeHealthQuarantined)
	assert.True(t, e.Drained)
	assert.Contains(t, nodeEvents(t, n), "HealthDraining")
}

func ptrInt(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
