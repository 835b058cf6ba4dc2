package kueue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// kueueVerdictWindow bounds how long a test watches for Kueue's TAS node controller to
// act on a node event: it reacts within its 100 ms batch period, so a verdict it has
// not given in this window is one it does not give.
const kueueVerdictWindow = 10 * time.Second

// endPod plays the kubelet of a container that exited 0.
func endPod(t *testing.T, p corev1.Pod) {
	t.Helper()
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}}}
	_, err := framework.C.Kube.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), &p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// kueueVerdict watches the Job's Workload for kueueVerdictWindow (less once Kueue has
// evicted it) and says what Kueue's TAS node controller did: the nodes it marked
// unhealthy at any time, and its evictions by reason.
func kueueVerdict(t *testing.T, namespace, job string) (unhealthy []string, evicted map[string]int64) {
	t.Helper()
	seen := map[string]bool{}
	_ = wait.PollUntilContextTimeout(context.Background(), waitInterval, kueueVerdictWindow, true, func(context.Context) (bool, error) {
		wl := workloadOf(t, namespace, job)
		if wl == nil {
			return false, nil
		}
		nodes, _, _ := unstructured.NestedSlice(wl.Object, "status", "unhealthyNodes")
		for _, n := range nodes {
			if name, _, _ := unstructured.NestedString(n.(map[string]any), "name"); !seen[name] {
				seen[name] = true
				unhealthy = append(unhealthy, name)
			}
		}
		var n int64
		evicted, n = evictions(t, namespace, job)
		return n > 0, nil
	})
	return unhealthy, evicted
}

// TestTASGangOnAnExclusivePoolTakesThePoolsTolerationInItsTemplate: a gang requiring
// one super node of an exclusive pool runs; one of its pods ends (its container exited
// 0) while the others run. Kueue's TAS node controller (TASReplaceNodeOnNodeTaints,
// beta and on in v0.17) judges the node by the taints the Workload's pod template
// tolerates, not by the flavor's tolerations that Kueue itself adds to the pods it
// starts (node_controller.go, classifyTaints of workload.PodSetsOnNode): a node left
// with no running pod of the gang and a taint the template does not tolerate is a
// failed node. So a gang whose template lacks the pool's toleration has that node
// marked unhealthy and, with no room for a replacement in its super node, is evicted
// and started again, once per pod that ends first (what docs/queueing.md says); the
// same gang whose template carries the toleration (policy.ExclusivePoolToleration,
// as the docs ask) is left alone.
func TestTASGangOnAnExclusivePoolTakesThePoolsTolerationInItsTemplate(t *testing.T) {
	const pool, ns = "qtas-excl", "q-tas-excl"
	createNamespace(t, ns, nil)
	_, nodes := playedSuperNodePool(t, pool, ns, 2, 4)
	startPlayedKubelet(t, ns, nodes)
	framework.WaitInService(t, framework.C.Kube, nodes...)
	waitQuota(t, pool, "64")

	for _, tc := range []struct {
		job       string
		tolerates bool
	}{{"plain", false}, {"tolerating", true}} {
		job := tasJob(ns, tc.job, pool, 4, superPod)
		if tc.tolerates {
			withPoolToleration(job, pool)
		}
		createJob(t, job)
		running := waitJobPodsRunning(t, ns, tc.job, 4)
		endPod(t, running[0])
		unhealthy, evicted := kueueVerdict(t, ns, tc.job)
		t.Logf("%s: pod %s on %s ended; nodes Kueue marked unhealthy %v, evictions %v",
			tc.job, running[0].Name, running[0].Spec.NodeName, unhealthy, evicted)
		if tc.tolerates {
			assert.Empty(t, unhealthy, "%s: no member is a failed node for the pool's own taint", tc.job)
			assert.Empty(t, evicted, "%s: the gang is not evicted", tc.job)
		} else {
			assert.Equal(t, []string{running[0].Spec.NodeName}, unhealthy,
				"%s: Kueue takes the pool's taint, which the template does not tolerate, for a node failure (if this changes, so does docs/queueing.md)", tc.job)
			assert.Equal(t, map[string]int64{"NodeFailures": 1}, evicted, "%s: evicted, no replacement left in its super node", tc.job)
		}
		require.NoError(t, framework.C.Kube.BatchV1().Jobs(ns).Delete(context.Background(), tc.job,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	}
}
