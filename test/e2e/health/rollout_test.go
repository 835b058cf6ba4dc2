package health

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// A fatal fault on a node in the middle of its driver install, with drain on: the
// health drain, held in Draining by a PodDisruptionBudget on the tenant's pod, asks
// again every pass while the installer's pod runs, and never evicts it (its Job has
// backoff 0: one eviction fails the node's upgrade). kwok completes Job pods a few
// seconds after they run, so the installer's window is short: before nodejob, a pass
// in it evicted the installer; now none may, which is what this asserts.
func TestHealthDrainDuringARolloutLeavesTheInstallerRunning(t *testing.T) {
	r := startController(t)
	nodes := healthPool(t, "hl-roll", 4, &v1alpha1.HealthPolicy{Drain: true, MaxQuarantinedPercent: 50})
	n := nodes[0]
	ctx := context.Background()
	kube := framework.C.Kube
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "hl-roll"}, Spec: v1alpha1.DriverRolloutSpec{Nodes: []string{n},
		Version: "24.1.rc3", Installer: v1alpha1.DriverInstaller{Image: "registry.example.com/ascend-installer:24.1.rc3"},
		WaitTimeout: &metav1.Duration{}}}
	require.NoError(t, c.Create(ctx, ro))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ro) })

	// The rollout drained the node and reached install: a tenant's pod arrives, held by
	// a budget, and the node faults.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return framework.UpgradeState(t, n) == string(policy.UpgradeInstall), nil
	}), "the rollout never reached install:\n%s", r.logs.String())
	labels := map[string]string{"app": "hl-roll-train"}
	tenant := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hl-roll-train", Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{NodeName: n, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "train:1"}}}}
	_, err = kube.CoreV1().Pods("default").Create(ctx, tenant, metav1.CreateOptions{})
	require.NoError(t, err)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "hl-roll-train", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrInt(1), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	_, err = kube.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.PolicyV1().PodDisruptionBudgets("default").Delete(context.Background(), pdb.Name, metav1.DeleteOptions{})
		_ = kube.CoreV1().Pods("default").Delete(context.Background(), tenant.Name, metav1.DeleteOptions{})
	})
	setCondition(t, n, "SysLogsXIDError", corev1.ConditionTrue)
	waitState(t, r, "hl-roll", n, v1alpha1.NodeHealthDraining)

	// The installer finishes (kwok) while the drain keeps asking; the rollout goes on.
	var job *batchv1.Job
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		jobs, err := kube.BatchV1().Jobs(localwebhook.Namespace).List(ctx, metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
		if err != nil || len(jobs.Items) != 1 {
			return false, nil
		}
		job = &jobs.Items[0]
		for _, cond := range job.Status.Conditions {
			if cond.Status == corev1.ConditionTrue && (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) {
				return true, nil
			}
		}
		return false, nil
	}), "the installer Job never ended")
	for _, cond := range job.Status.Conditions {
		assert.False(t, cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue, "the installer Job failed: %s %s", cond.Reason, cond.Message)
	}
	events, err := kube.CoreV1().Events(localwebhook.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=HealthDrain"})
	require.NoError(t, err)
	assert.Empty(t, events.Items, "no pod in litepool's namespace was evicted by the health drain")
	assert.Equal(t, v1alpha1.NodeHealthDraining, stateOf(t, "hl-roll", n), "the budget still holds the tenant's pod")
	var got v1alpha1.DriverRollout
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ro), &got))
	require.Len(t, got.Status.Nodes, 1)
	assert.NotEqual(t, string(policy.UpgradeFailed), got.Status.Nodes[0].State, got.Status.Nodes[0].Message)
}
