package kueue

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// queuePool makes an exclusive Training Pool with spec.queue and the health loop, and
// n kwok nodes of 8 GPUs in it; it returns the node names.
func queuePool(t *testing.T, name string, n int, namespaces ...string) []string {
	t.Helper()
	_, err := poolclient.New(framework.C.Dynamic).Create(context.Background(), &v1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Exclusive: true, Namespaces: namespaces,
			Accelerator: v1alpha1.AcceleratorSpec{ResourceName: gpu},
			Health:      &v1alpha1.HealthPolicy{HoldTime: &metav1.Duration{Duration: 2 * time.Second}, MaxQuarantinedPercent: 50},
			StressTest:  &v1alpha1.StressTestSpec{Image: "registry.example.com/gpu-stress:1.0"},
			Queue:       &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var nodes []string
	for i := 1; i <= n; i++ {
		node := name + "-" + string(rune('0'+i))
		framework.CreateReadyNode(t, framework.C.Kube, node, name)
		nodes = append(nodes, node)
	}
	return nodes
}

func getPool(t *testing.T, name string) *v1alpha1.Pool {
	t.Helper()
	p, err := poolclient.New(framework.C.Dynamic).Get(context.Background(), name)
	require.NoError(t, err)
	return p
}

// nominalQuota is the ClusterQueue's quota of the accelerator, as a number ("" when it
// has none; the API server writes 1000 as "1k").
func nominalQuota(t *testing.T, name string) string {
	t.Helper()
	return nominalQuotaOf(t, name, gpu)
}

// nominalQuotaOf is nominalQuota of resource rn.
func nominalQuotaOf(t *testing.T, name string, rn corev1.ResourceName) string {
	t.Helper()
	cq, err := dyn(clusterQueues, "").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	for _, g := range groups {
		for _, f := range g.(map[string]any)["flavors"].([]any) {
			for _, r := range f.(map[string]any)["resources"].([]any) {
				if rm := r.(map[string]any); rm["name"] == string(rn) {
					s, _ := rm["nominalQuota"].(string)
					q, err := resource.ParseQuantity(s)
					if err != nil {
						return s
					}
					return strconv.FormatInt(q.Value(), 10)
				}
			}
		}
	}
	return ""
}

// waitQuota waits until the ClusterQueue's quota is want and returns how long it took.
func waitQuota(t *testing.T, name, want string) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return nominalQuota(t, name) == want, nil
	})
	require.NoError(t, err, "ClusterQueue %s: quota %q, want %q", name, nominalQuota(t, name), want)
	return time.Since(start)
}

// playStressPods completes the health loop's re-check pods (they pass) until the test ends.
func playStressPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			pods, err := framework.C.Kube.CoreV1().Pods(localwebhook.Namespace).List(ctx, metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				term := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}
				p.Status.Phase = corev1.PodSucceeded
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "stress", Image: p.Spec.Containers[0].Image, State: corev1.ContainerState{Terminated: term}}}
				_, _ = framework.C.Kube.CoreV1().Pods(localwebhook.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func hasQuarantineTaint(t *testing.T, node string) bool {
	for _, tn := range framework.Node(t, node).Spec.Taints {
		if tn.Key == policy.TaintQuarantine {
			return true
		}
	}
	return false
}

// The Show: a pool of 3 nodes of 8 GPUs is a Kueue queue whose quota follows
// its healthy capacity. A 16-GPU Job is admitted and runs on the pool's nodes. With an
// 8-GPU Job admitted, a node loses a GPU and the health loop quarantines it: the quota
// drops to 16, and a 16-GPU Job, which the 24 GPUs before the fault would have taken,
// waits in Kueue for quota with no pod created. The node returns: the quota is 24 again
// and the Job is admitted and runs.
func TestPoolQueueFollowsHealthyCapacity(t *testing.T) {
	const pool, ns = "qtrain", "q-team"
	createNamespace(t, ns, nil)
	nodes := queuePool(t, pool, 3, ns)
	waitQuota(t, pool, "24")

	rf, err := dyn(flavors, "").Get(context.Background(), pool, metav1.GetOptions{})
	require.NoError(t, err)
	labels, _, _ := unstructured.NestedStringMap(rf.Object, "spec", "nodeLabels")
	assert.Equal(t, map[string]string{policy.LabelPool: pool}, labels)
	taints, _, _ := unstructured.NestedSlice(rf.Object, "spec", "nodeTaints")
	assert.Len(t, taints, 1, "an exclusive pool's taint")
	lq := waitObject(t, localQueues, ns, pool)
	assert.Equal(t, pool, lq.Object["spec"].(map[string]any)["clusterQueue"], "the LocalQueue in the namespace the pool admits")
	cond := waitQueueMessage(t, pool, "quota 24 nvidia.com/gpu from 3 of 3 members")
	assert.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)

	podLabels := map[string]string{policy.LabelPool: pool}
	// 16 GPUs, admitted, run on the pool's nodes (kwok completes them).
	createJob(t, gpuJob(ns, "first", pool, 2, 8, podLabels, false))
	waitAdmitted(t, ns, "first")
	for _, pod := range waitJobPodsRunning(t, ns, "first", 2) {
		assert.Contains(t, nodes, pod.Spec.NodeName)
		assert.Contains(t, pod.Spec.Tolerations, policy.ExclusivePoolToleration(pool))
	}
	waitJobDone(t, ns, "first")

	// 8 GPUs of quota held by an admitted Job (its pod gated, see gpuJob).
	createJob(t, gpuJob(ns, "steady", pool, 1, 8, podLabels, true))
	waitAdmitted(t, ns, "steady")
	faulty := nodes[0]

	// A GPU fails on another node: the health loop quarantines it, the quota drops.
	playStressPods(t)
	start := time.Now()
	setAllocatable(t, faulty, 7, 8)
	tainted, dropped := transition(t, pool, faulty, true, "16")
	require.False(t, dropped.Before(tainted), "the quota follows the quarantine, not the other way round")

	createJob(t, gpuJob(ns, "second", pool, 2, 8, podLabels, false))
	var msg string
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		wl := workloadOf(t, ns, "second")
		if wl == nil {
			return false, nil
		}
		var status string
		status, _, msg = condition(wl, "QuotaReserved")
		return status == "False" && strings.Contains(msg, "insufficient"), nil
	}), "the 16-GPU Job should wait for quota: %s", workloadSummary(t, ns, "second"))
	t.Logf("waiting Job: %s", msg)
	assert.Contains(t, msg, "quota")
	job, err := framework.C.Kube.BatchV1().Jobs(ns).Get(context.Background(), "second", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, ptr.Deref(job.Spec.Suspend, false), "Kueue keeps the waiting Job suspended")
	assert.Empty(t, jobPods(t, ns, "second"), "no pod of a waiting Job")
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		q := getPool(t, pool).Status.Queue
		return q != nil && q.Pending == 1 && q.Admitted == 1 && q.Used == 8, nil
	}), "Pool status.queue: %+v; ClusterQueue status: %v", getPool(t, pool).Status.Queue, cqStatus(t, pool))
	wide := framework.C.MustLitepool(t, "get", "pools", pool, "-o", "wide")
	assert.Regexp(t, `QUEUE QUOTA\s+QUEUE ADMITTED\s+QUEUE PENDING`, wide)
	assert.Regexp(t, `8/16\s+1\s+1\s*$`, strings.TrimSpace(wide))
	desc := framework.C.MustLitepool(t, "describe", "pool", pool)
	assert.Contains(t, desc, "Kueue ClusterQueue qtrain: quota 16 nvidia.com/gpu from 2 schedulable nodes")
	assert.Regexp(t, `Queue Workloads:\s+1 admitted \(8 nvidia.com/gpu used\), 1 pending`, desc)
	assert.Regexp(t, `Local Queues:\s+q-team`, desc)
	t.Logf("kubectl litepool get pools -o wide:\n%s", wide)
	t.Logf("kubectl litepool describe pool:\n%s", desc)
	wls := framework.C.Kubectl(t, "", "get", "workloads", "-n", ns)
	t.Logf("kubectl get workloads:\n%s%s", wls.Stdout, wls.Stderr)

	// The GPU comes back: re-check, hold time, return; the quota is 24 and the Job runs.
	back := time.Now()
	setAllocatable(t, faulty, 8, 8)
	released, restored := transition(t, pool, faulty, false, "24")
	for _, e := range getPool(t, pool).Status.NodeHealth {
		if e.Node == faulty {
			var steps []string
			for _, h := range e.History {
				steps = append(steps, h.Time.Format("15:04:05")+" "+string(h.State))
			}
			t.Logf("health loop of %s: %s", faulty, strings.Join(steps, ", "))
		}
	}
	waitAdmitted(t, ns, "second")
	for _, pod := range waitJobPodsRunning(t, ns, "second", 2) {
		assert.Contains(t, nodes, pod.Spec.NodeName)
	}
	// A cordon (by hand or by a driver rollout) takes the node's GPUs out of the quota
	// too, and the uncordon gives them back.
	patchNode(t, faulty, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	waitQuota(t, pool, "16")
	patchNode(t, faulty, func(n *corev1.Node) { n.Spec.Unschedulable = false })
	waitQuota(t, pool, "24")

	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return strings.Contains(framework.C.MustLitepool(t, "describe", "pool", pool), "quota 16 -> 24 nvidia.com/gpu (3 schedulable members; none held out)"), nil
	}), "the Pool's Events say how the quota moved:\n%s", framework.C.MustLitepool(t, "describe", "pool", pool))
	// The device plugin's drop may show first (23) when the controller sees it before
	// the quarantine.
	assert.Regexp(t, `quota 2[34] -> 16 nvidia.com/gpu \(2 schedulable members; held out: `+faulty+` Quarantined\)`,
		framework.C.MustLitepool(t, "describe", "pool", pool))

	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("fault: device lost -> quarantine taint %s -> quota 16 %s later (%s in all)",
		ms(tainted.Sub(start)), ms(dropped.Sub(tainted)), ms(dropped.Sub(start)))
	t.Logf("return: device back -> taint removed %s (re-check and hold time) -> quota 24 %s later (%s in all)",
		ms(released.Sub(back)), ms(restored.Sub(released)), ms(restored.Sub(back)))
}

// waitJobDone waits until the Job has completed.
func waitJobDone(t *testing.T, namespace, name string) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		job, err := framework.C.Kube.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range job.Status.Conditions {
			if c.Type == "Complete" && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}), "Job %s/%s never completed", namespace, name)
}

// waitQueueCondition waits until the Pool has its Queue condition and returns it.
func waitQueueCondition(t *testing.T, pool string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		cond = apimeta.FindStatusCondition(getPool(t, pool).Status.Conditions, "Queue")
		return cond != nil, nil
	}), "Pool %s never got its Queue condition", pool)
	return cond
}

// waitQueueMessage waits until the Pool's Queue condition says want, and returns it. The
// status pass writes the condition after the ClusterQueues it shapes, a pass or more later
// (longer under load, or while new members' not-ready taints come off).
func waitQueueMessage(t *testing.T, pool, want string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		cond = apimeta.FindStatusCondition(getPool(t, pool).Status.Conditions, "Queue")
		return cond != nil && strings.Contains(cond.Message, want), nil
	})
	require.NoError(t, err, "Pool %s's Queue condition should say %q; it is %+v", pool, want, cond)
	return cond
}

func cqStatus(t *testing.T, name string) any {
	cq, err := dyn(clusterQueues, "").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return cq.Object["status"]
}

// waitObject waits until the object exists and returns it.
func waitObject(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		obj, err = dyn(gvr, namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	}), "%s %s/%s never appeared", gvr.Resource, namespace, name)
	return obj
}

// transition watches a node's quarantine taint come (on) or go and the pool's quota
// become quota, and returns when each was first seen (polled every 20 ms).
func transition(t *testing.T, pool, node string, on bool, quota string) (taint, quotaAt time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		if taint.IsZero() && hasQuarantineTaint(t, node) == on {
			taint = time.Now()
		}
		if quotaAt.IsZero() && nominalQuota(t, pool) == quota {
			quotaAt = time.Now()
		}
		return !taint.IsZero() && !quotaAt.IsZero(), nil
	})
	require.NoError(t, err, "node %s: quarantine taint %v seen at %v; ClusterQueue %s: quota %q, want %q", node, on, taint, pool, nominalQuota(t, pool), quota)
	return taint, quotaAt
}
