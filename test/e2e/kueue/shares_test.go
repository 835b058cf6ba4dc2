package kueue

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/queue"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// waitWaiting waits until Kueue says the Job's Workload waits for quota, and returns
// its message; the Job stays suspended with no pod.
func waitWaiting(t *testing.T, namespace, job, want string) string {
	t.Helper()
	var msg string
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		wl := workloadOf(t, namespace, job)
		if wl == nil {
			return false, nil
		}
		var status string
		status, _, msg = condition(wl, "QuotaReserved")
		return status == "False" && strings.Contains(msg, want), nil
	}), "Job %s/%s should wait (%q): %s", namespace, job, want, workloadSummary(t, namespace, job))
	assert.Empty(t, jobPods(t, namespace, job), "no pod of a waiting Job")
	return msg
}

// admittedTo is the ClusterQueue Kueue admitted the Workload through.
func admittedTo(wl *unstructured.Unstructured) string {
	cq, _, _ := unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue")
	return cq
}

// gpuctl's kind: quota, as shares of a pool: a pool of 3 nodes x 8 GPUs gives team a 8
// (it may borrow) and team b 8 (borrowingLimit 0, a hard ceiling as gpuctl's
// ResourceQuota is), and keeps 8. Each share is a ClusterQueue in the pool's cohort and
// the team's LocalQueue points at it. A Job within a share is admitted and runs on the
// pool's nodes; b's Job beyond its share waits while the pool's 8 lie unused; a's Job
// beyond its share borrows them. A LocalQueue of a's own pointing at the pool's queue
// gets nothing. Two nodes out: 8 GPUs for 16 of shares, each share shrinks to 4 and the
// pool keeps 0. The shares' queues leave with the shares.
func TestPoolSharesGiveNamespacesTheirPart(t *testing.T) {
	const pool, a, b = "qshare", "q-share-a", "q-share-b"
	createNamespace(t, a, nil)
	createNamespace(t, b, nil)
	nodes := queuePool(t, pool, 3, a, b)
	patch := framework.C.Kubectl(t, "", "patch", "pools.runwhere.ai", pool, "--type", "merge", "-p",
		`{"spec":{"queue":{"shares":[{"namespace":"`+a+`","accelerators":8},{"namespace":"`+b+`","accelerators":8,"borrowingLimit":0}]}}}`)
	require.Equal(t, 0, patch.ExitCode, patch.Stderr)
	qa, qb := queue.ShareQueueName(pool, a), queue.ShareQueueName(pool, b)
	// Limits with nothing to borrow from: Kueue would refuse the ClusterQueue; the CRD
	// refuses the Pool first.
	bad := framework.C.Kubectl(t, "", "patch", "pools.runwhere.ai", pool, "--type", "merge", "-p", `{"spec":{"queue":{"shares":null,"lendingLimit":4}}}`)
	assert.NotEqual(t, 0, bad.ExitCode)
	assert.Contains(t, bad.Stderr, "need a cohort to borrow from and lend to")
	waitQuota(t, pool, "8")
	waitQuota(t, qa, "8")
	waitQuota(t, qb, "8")
	for _, ns := range []string{a, b} {
		lq := waitObject(t, localQueues, ns, pool)
		require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
			lq, _ = dyn(localQueues, ns).Get(ctx, pool, metav1.GetOptions{})
			return lq != nil && lq.Object["spec"].(map[string]any)["clusterQueue"] == queue.ShareQueueName(pool, ns), nil
		}), "the LocalQueue in %s should point at its share: %v", ns, lq)
	}
	cq := waitObject(t, clusterQueues, "", qa)
	cohort, _, _ := unstructured.NestedString(cq.Object, "spec", "cohortName")
	assert.Equal(t, pool, cohort, "shares and the pool's queue share a cohort")
	waitQueueMessage(t, pool, "shares (ClusterQueues in cohort qshare): q-share-a 8, q-share-b 8")

	podLabels := map[string]string{policy.LabelPool: pool}
	// Within a's share: admitted through a's ClusterQueue, runs on the pool's nodes.
	createJob(t, gpuJob(a, "a-run", pool, 1, 8, podLabels, false))
	assert.Equal(t, qa, admittedTo(waitAdmitted(t, a, "a-run")))
	for _, pod := range waitJobPodsRunning(t, a, "a-run", 1) {
		assert.Contains(t, nodes, pod.Spec.NodeName)
	}
	waitJobDone(t, a, "a-run")

	// b holds its 8; its next 8 wait, though the pool's own 8 are unused.
	createJob(t, gpuJob(b, "b-within", pool, 1, 8, podLabels, true))
	assert.Equal(t, qb, admittedTo(waitAdmitted(t, b, "b-within")))
	createJob(t, gpuJob(b, "b-beyond", pool, 1, 8, podLabels, false))
	t.Logf("b beyond its share: %s", waitWaiting(t, b, "b-beyond", "insufficient"))

	// a holds its 8 and borrows the pool's 8 through the cohort.
	createJob(t, gpuJob(a, "a-within", pool, 1, 8, podLabels, true))
	waitAdmitted(t, a, "a-within")
	createJob(t, gpuJob(a, "a-borrow", pool, 1, 8, podLabels, true))
	assert.Equal(t, qa, admittedTo(waitAdmitted(t, a, "a-borrow")), "a borrows beyond its share")
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		st := getPool(t, pool).Status.Queue
		return st != nil && len(st.Shares) == 2 && st.Shares[0].Used == 16 && st.Used == 24, nil
	}), "status.queue should show a's 16 (8 borrowed) and 24 in all: %+v", getPool(t, pool).Status.Queue)
	desc := framework.C.MustLitepool(t, "describe", "pool", pool)
	assert.Contains(t, desc, "Queue Shares:     q-share-a 8 (16 used, ClusterQueue qshare-q-share-a), q-share-b 8 (8 used, ClusterQueue qshare-q-share-b)\n")
	waitWaiting(t, b, "b-beyond", "insufficient")

	// A LocalQueue of a's own, pointing at the pool's queue: a cannot pass its share so.
	createObject(t, localQueues, a, map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "around", "namespace": a}, "spec": map[string]any{"clusterQueue": pool}})
	createJob(t, gpuJob(a, "a-around", "around", 1, 8, podLabels, false))
	t.Logf("a around its share: %s", waitWaiting(t, a, "a-around", "namespace"))

	// Two members out: 8 GPUs for 16 of shares.
	for _, n := range nodes[1:] {
		cordon := framework.C.Kubectl(t, "", "cordon", n)
		require.Equal(t, 0, cordon.ExitCode, cordon.Stderr)
	}
	waitQuota(t, pool, "0")
	waitQuota(t, qa, "4")
	waitQuota(t, qb, "4")
	waitQueueMessage(t, pool, "q-share-a 4, q-share-b 4 (asked 16, capacity 8: each share shrunk in proportion)")
	for _, n := range nodes[1:] {
		framework.C.Kubectl(t, "", "uncordon", n)
	}
	waitQuota(t, qa, "8")

	// b's share taken out: its ClusterQueue goes, b's LocalQueue points at the pool's.
	patch = framework.C.Kubectl(t, "", "patch", "pools.runwhere.ai", pool, "--type", "merge", "-p",
		`{"spec":{"queue":{"shares":[{"namespace":"`+a+`","accelerators":8}]}}}`)
	require.Equal(t, 0, patch.ExitCode, patch.Stderr)
	waitQuota(t, pool, "16")
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		lq, err := dyn(localQueues, b).Get(ctx, pool, metav1.GetOptions{})
		return err == nil && lq.Object["spec"].(map[string]any)["clusterQueue"] == pool, nil
	}), "b's LocalQueue should point at the pool's queue again")
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		cq, err := dyn(clusterQueues, "").Get(ctx, qb, metav1.GetOptions{})
		return err != nil || cq.GetDeletionTimestamp() != nil, nil
	}), "b's share's ClusterQueue should be deleted (Kueue holds it while b-within is admitted)")
}
