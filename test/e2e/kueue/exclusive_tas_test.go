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

	"github.com/runwhere-ai/litepool/pkg/policy"
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
// failed node, and with no room for a replacement in its super node the gang is evicted
// and started again, once per pod that ends first. So jobs.runwhere.ai writes the pool's
// toleration (policy.ExclusivePoolToleration) into the template of a Kueue Job of the
// pool: a gang written without it ("plain", which Kueue evicted once before that entry)
// is stored with it and left alone, as is one whose author wrote it ("tolerating", left
// unchanged).
func TestTASGangOnAnExclusivePoolTakesThePoolsTolerationInItsTemplate(t *testing.T) {
	const pool, ns = "qtas-excl", "q-tas-excl"
	createNamespace(t, ns, nil)
	_, nodes := playedSuperNodePool(t, pool, ns, 2, 4)
	startPlayedKubelet(t, ns, nodes)
	framework.WaitInService(t, framework.C.Kube, nodes...)
	waitQuota(t, pool, "64")
	tol := policy.ExclusivePoolToleration(pool)

	for _, tc := range []struct {
		job     string
		written []corev1.Toleration
	}{{"plain", nil}, {"tolerating", []corev1.Toleration{tol}}} {
		job := tasJob(ns, tc.job, pool, 4, superPod)
		job.Spec.Template.Spec.Tolerations = tc.written
		createJob(t, job)
		stored, err := framework.C.Kube.BatchV1().Jobs(ns).Get(context.Background(), tc.job, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []corev1.Toleration{tol}, stored.Spec.Template.Spec.Tolerations,
			"%s: the template carries the pool's toleration once, whoever wrote it", tc.job)
		assert.Equal(t, pool, stored.Spec.Template.Spec.NodeSelector[policy.LabelPool], "%s: and the pool's nodeSelector, as its pods", tc.job)
		running := waitJobPodsRunning(t, ns, tc.job, 4)
		endPod(t, running[0])
		unhealthy, evicted := kueueVerdict(t, ns, tc.job)
		t.Logf("%s: pod %s on %s ended; nodes Kueue marked unhealthy %v, evictions %v",
			tc.job, running[0].Name, running[0].Spec.NodeName, unhealthy, evicted)
		assert.Empty(t, unhealthy, "%s: no member is a failed node for the pool's own taint", tc.job)
		assert.Empty(t, evicted, "%s: the gang is not evicted", tc.job)
		require.NoError(t, framework.C.Kube.BatchV1().Jobs(ns).Delete(context.Background(), tc.job,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	}
}
