package kueue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Rows of docs/security.md's table of queue rights, played against Kueue for real.

// A ClusterQueue made before the pool's, with the pool's name and label but no
// controller ownerReference to the Pool, is someone else's: litepool neither adopts nor
// changes it, says so on the Pool, and writes the rest of the queue. Once it is gone,
// the pool's own takes the name.
func TestAQueueLitepoolDoesNotOwnIsNotTouched(t *testing.T) {
	const pool = "qtaken"
	createObject(t, clusterQueues, "", map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": pool, "labels": map[string]any{policy.LabelPool: pool}},
		"spec": map[string]any{"resourceGroups": []any{map[string]any{"coveredResources": []any{string(gpu)},
			"flavors": []any{map[string]any{"name": pool, "resources": []any{map[string]any{"name": string(gpu), "nominalQuota": "1000"}}}}}}}})
	queuePool(t, pool, 1)

	var cond *metav1.Condition
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		cond = waitQueueCondition(t, pool)
		return cond.Reason == "NotOwned", nil
	}), "the Pool should say its queue's name is taken: %+v", cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Contains(t, cond.Message, `ClusterQueue qtaken exists and is not pool "qtaken"'s (it has no controller ownerReference to the Pool)`)
	assert.Equal(t, "1000", nominalQuota(t, pool), "not adopted, not changed")
	cq, err := dyn(clusterQueues, "").Get(context.Background(), pool, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, cq.GetOwnerReferences())
	rf := waitObject(t, flavors, "", pool)
	assert.Len(t, rf.GetOwnerReferences(), 1, "the rest of the queue is the pool's")

	require.NoError(t, dyn(clusterQueues, "").Delete(context.Background(), pool, metav1.DeleteOptions{}))
	waitQuota(t, pool, "8")
}

// A pools/status writer (no shipped role grants it) writes a quota into status.queue: the
// ClusterQueue keeps the quota the nodes give, and the status says it again.
func TestAStatusWriterCannotRaiseTheQuota(t *testing.T) {
	const pool = "qstatus"
	queuePool(t, pool, 1)
	waitQuota(t, pool, "8")
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		q := getPool(t, pool).Status.Queue
		return q != nil && q.Quota == 8, nil
	}))

	// The controller writes the same status meanwhile: the forger reads again on a conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := framework.C.Dynamic.Resource(v1alpha1.PoolResource).Get(context.Background(), pool, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, int64(1000), "status", "queue", "quota"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, int64(125), "status", "queue", "schedulableNodes"); err != nil {
			return err
		}
		_, err = framework.C.Dynamic.Resource(v1alpha1.PoolResource).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
		return err
	}))

	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		q := getPool(t, pool).Status.Queue
		return q != nil && q.Quota == 8 && q.SchedulableNodes == 1, nil
	}), "the controller writes the status from the nodes again: %+v", getPool(t, pool).Status.Queue)
	assert.Equal(t, "8", nominalQuota(t, pool))
}

// A tenant who may create LocalQueues makes one, in a namespace the pool does not admit,
// pointing at the pool's ClusterQueue: Kueue admits nothing through it (the
// ClusterQueue's namespaceSelector), and no pod of its Job is made.
func TestALocalQueueElsewhereGetsNothing(t *testing.T) {
	const pool, admitted, other = "qnsonly", "q-ns-in", "q-ns-out"
	createNamespace(t, admitted, nil)
	createNamespace(t, other, nil)
	queuePool(t, pool, 1, admitted)
	waitQuota(t, pool, "8")
	_, err := dyn(localQueues, other).Get(context.Background(), pool, metav1.GetOptions{})
	require.Error(t, err, "no LocalQueue of the pool in a namespace it does not admit")
	createObject(t, localQueues, other, map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "mine", "namespace": other}, "spec": map[string]any{"clusterQueue": pool}})

	createJob(t, gpuJob(other, "sneak", "mine", 1, 8, map[string]string{policy.LabelPool: pool}, false))
	var msg string
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		wl := workloadOf(t, other, "sneak")
		if wl == nil {
			return false, nil
		}
		var status string
		status, _, msg = condition(wl, "QuotaReserved")
		return status == "False" && msg != "", nil
	}), "the Job's workload should be refused: %s", workloadSummary(t, other, "sneak"))
	t.Logf("Kueue: %s", msg)
	assert.Contains(t, msg, "namespace")
	job, err := framework.C.Kube.BatchV1().Jobs(other).Get(context.Background(), "sneak", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, ptr.Deref(job.Spec.Suspend, false))
	assert.Empty(t, jobPods(t, other, "sneak"))
}
