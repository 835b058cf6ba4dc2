package controller

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const stressImage = "registry.example.com/npu-stress:1.0"

// A stress run taken by the controller: the plugin creates the StressRun and exits at
// once, the leader runs it in litepool-system, a failing node ends degraded, and the
// run ends Failed with its results in status. A second run followed with --wait prints
// progress and ends as a run in the plugin ends (T2 naming the failing node).
func TestStressRunInClusterCompletesAfterPluginExit(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	stressLeader(t, r)
	nodes := stressPool(t, "ctl-stress", 3)
	var release atomic.Bool
	release.Store(true)
	stopAgent := playStress(t, "ctl-stress-", map[string]string{nodes[1]: "hccs link 3 down"}, &release)
	defer stopAgent()

	out := framework.C.MustLitepool(t, "stress", "run", "--pool", "ctl-stress", "--tests", "npu,hccs", "--image", stressImage, "--timeout", "2m")
	name := regexp.MustCompile(`^stressrun/(\S+) created\n`).FindStringSubmatch(out)
	require.NotNil(t, name, out)
	assert.Contains(t, out, "stress run "+name[1]+": taken by litepool's controller")
	assert.NotContains(t, out, "NODE", "the plugin runs nothing itself")

	run := waitStressRun(t, name[1], v1alpha1.StressRunFailed, r)
	assert.Equal(t, []int32{3, 2, 1, 0}, []int32{run.Status.Total, run.Status.Passed, run.Status.Failed, run.Status.Skipped})
	assert.Equal(t, localwebhook.Namespace, run.Status.Namespace)
	assert.Equal(t, []string{nodes[1]}, stress.FailedNodes(&run.Status))
	assert.Equal(t, policy.HealthDegraded, framework.Node(t, nodes[1]).Labels[policy.LabelHealth])
	assert.Regexp(t, `^npu,hccs failed at \S+ \(stress run `+name[1]+`\): hccs: exit 1 \(Error\): hccs link 3 down$`, framework.Node(t, nodes[1]).Annotations[policy.AnnotationStressResult])
	assert.Equal(t, policy.NodeDegraded, policy.StateOfNode(framework.Node(t, nodes[1])))
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[0]).Labels[policy.LabelHealth])
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[2]).Labels[policy.LabelHealth])
	assert.Equal(t, 1, waitNodeEvents(t, nodes[1], "StressTestFailed", 1), "the run ran once")
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return len(stressPods(t, "ctl-stress-")) == 1, nil
	}))
	assert.Equal(t, map[string]int{nodes[1]: 1}, stressPods(t, "ctl-stress-"), "the failing test's pod is kept, the passed ones deleted")
	assertNoStressPodsOutside(t)

	// Followed with --wait: progress, then the plugin's summary and T2.
	res := framework.C.Litepool(t, "stress", "run", "--pool", "ctl-stress", "--tests", "npu,hccs", "--image", stressImage, "-w")
	assert.Equal(t, 1, res.ExitCode, res.Stdout+res.Stderr)
	assert.Regexp(t, `stress run \S+: failed\nNODE\s+TEST\s+RESULT\s+DETAIL\n`, res.Stdout)
	assert.True(t, strings.HasSuffix(res.Stderr, "pool ctl-stress: 2 passed, 1 failed, 0 skipped\nerror: [T2] 1 node(s) failed the stress test and are now runwhere.ai/health=degraded: "+nodes[1]+"\n"), res.Stderr)
	assert.Equal(t, 2, waitNodeEvents(t, nodes[1], "StressTestFailed", 2))
}

// The leader dies while the run's pods are running: the next leader takes the same
// run on from its status, level-triggered, and finishes it without creating any pod a
// second time (one pod per node in all). A second run of the pool meanwhile is refused.
func TestStressRunSurvivesALeaderChangeWithoutRunningTwice(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	first := startReplica(t, certs)
	stressLeader(t, first)
	second := startReplica(t, certs)
	nodes := stressPool(t, "ctl-sk", 2)
	var release atomic.Bool
	stopAgent := playStress(t, "ctl-sk-", map[string]string{}, &release)
	defer stopAgent()
	created := countStressPodCreations(t, "ctl-sk-")

	out := framework.C.MustLitepool(t, "stress", "run", "--pool", "ctl-sk", "--tests", "npu", "--image", stressImage, "--keep-pods")
	name := regexp.MustCompile(`^stressrun/(\S+) created\n`).FindStringSubmatch(out)
	require.NotNil(t, name, out)
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return len(stressPods(t, "ctl-sk-")) == len(nodes), nil
	}), "the first leader never started the pods:\n%s", first.Logs.String())
	// One run at a time per pool.
	busy := framework.C.Litepool(t, "stress", "run", "--pool", "ctl-sk", "--tests", "npu", "--image", stressImage)
	assert.NotEqual(t, 0, busy.ExitCode)
	assert.Contains(t, busy.Stderr, "pool ctl-sk: stress run "+name[1]+" is running in the cluster: wait until it ends")
	first.Kill()
	stressLeader(t, second)
	release.Store(true)

	run := waitStressRun(t, name[1], v1alpha1.StressRunSucceeded, second)
	assert.Equal(t, int32(2), run.Status.Passed)
	assert.Equal(t, map[string]int{nodes[0]: 1, nodes[1]: 1}, created(), "no node tested twice")
	assert.Equal(t, map[string]int{nodes[0]: 1, nodes[1]: 1}, stressPods(t, "ctl-sk-"), "--keep-pods kept them")
}

// stressLeader waits until r holds the leader Lease.
func stressLeader(t *testing.T, r *replica) { r.WaitLeader(t, waitTimeout) }

// stressPool makes a pool of n fresh Ascend nodes named name-1..n.
func stressPool(t *testing.T, name string, n int) []string {
	return framework.AscendPool(t, name, n, "24.1.rc2", v1alpha1.SoftwareSpec{CANN: "8.2.RC1"})
}

// playStress plays the stress-test image on the nodes named prefix*: once release is
// set it ends each of their stress pods, Failed (exit 1, with the message) on the nodes
// in fail (the test the message starts with) and Succeeded elsewhere (kwok keeps plain
// pods Running).
func playStress(t *testing.T, prefix string, fail map[string]string, release *atomic.Bool) func() {
	t.Helper()
	return framework.CompletePods(t, localwebhook.Namespace, stress.LabelComponent+"="+stress.Component, func(p *corev1.Pod) (framework.PodEnd, bool) {
		if !release.Load() || !strings.HasPrefix(p.Spec.NodeName, prefix) {
			return framework.PodEnd{}, false
		}
		if msg, failing := fail[p.Spec.NodeName]; failing && strings.HasPrefix(msg, p.Annotations[stress.AnnotationTest]+" ") {
			return framework.PodEnd{Exit: 1, Message: msg}, true
		}
		return framework.PodEnd{}, true
	})
}

// countStressPodCreations watches litepool's namespace and counts, per node named
// prefix*, the stress pods ever created: the cluster's own account.
func countStressPodCreations(t *testing.T, prefix string) func() map[string]int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := framework.C.Kube.CoreV1().Pods(localwebhook.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string]bool{}
	out := map[string]int{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !strings.HasPrefix(p.Spec.NodeName, prefix) || seen[string(p.UID)] {
				continue
			}
			mu.Lock()
			seen[string(p.UID)] = true
			out[p.Spec.NodeName]++
			mu.Unlock()
		}
	}()
	t.Cleanup(cancel)
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		cp := map[string]int{}
		for k, v := range out {
			cp[k] = v
		}
		return cp
	}
}

// waitStressRun waits until the run reaches phase and returns it.
func waitStressRun(t *testing.T, name string, phase v1alpha1.StressRunPhase, r *replica) *v1alpha1.StressRun {
	t.Helper()
	var run v1alpha1.StressRun
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		u, err := framework.C.Dynamic.Resource(v1alpha1.StressRunResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &run); err != nil {
			return false, err
		}
		return run.Status.Phase == phase && (!phase.Finished() || run.Status.Settled()), nil
	})
	logs := ""
	if r != nil {
		logs = r.Logs.String()
	}
	require.NoError(t, err, "stress run %s: %+v, want %s\n%s", name, run.Status, phase, logs)
	return &run
}

// stressPods counts the stress pods (not being deleted) in litepool's namespace on the
// nodes named prefix*.
func stressPods(t *testing.T, prefix string) map[string]int {
	t.Helper()
	pods, err := framework.C.Kube.CoreV1().Pods(localwebhook.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
	require.NoError(t, err)
	out := map[string]int{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Spec.NodeName, prefix) && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

// assertNoStressPodsOutside: no stress pod in any namespace but litepool's.
func assertNoStressPodsOutside(t *testing.T) {
	t.Helper()
	pods, err := framework.C.Kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.Equal(t, localwebhook.Namespace, p.Namespace, "stress pod %s", p.Name)
	}
}

// waitNodeEvents waits until node has at least n Events of reason and returns how many
// it has: the controller records the Event after the run's status, which the plugin
// and waitStressRun read.
func waitNodeEvents(t *testing.T, node, reason string, n int) int {
	t.Helper()
	got := 0
	_ = wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		got = nodeEvents(t, node, reason)
		return got >= n, nil
	})
	return got
}

func nodeEvents(t *testing.T, node, reason string) int {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason})
	require.NoError(t, err)
	return len(list.Items)
}
