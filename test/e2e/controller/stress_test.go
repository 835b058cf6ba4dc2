package controller

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
	"github.com/runwhere-ai/litepool/test/e2e/framework/localwebhook"
)

const stressImage = "registry.example.com/npu-stress:1.0"

// A stress run handed to the cluster: the plugin records it and exits at once, the
// leader runs it, a failing node ends degraded, and the run is recorded Done on the
// Pool. A second run followed with --wait prints progress and ends as a run in the
// plugin ends (T2 naming the failing node).
func TestStressRunInClusterCompletesAfterPluginExit(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	waitLeader(t, r)
	nodes := makePool(t, "ctl-stress", 3)
	var release atomic.Bool
	release.Store(true)
	stopAgent := playStress(t, "ctl-stress-", map[string]string{nodes[1]: "hccs link 3 down"}, &release)
	defer stopAgent()

	out := framework.C.MustLitepool(t, "stress", "run", "--pool", "ctl-stress", "--tests", "npu,hccs", "--image", stressImage, "--timeout", "2m")
	assert.Regexp(t, `^stress run \S+: handed to the controller in litepool-webhook`, out)
	assert.NotContains(t, out, "NODE", "the plugin runs nothing itself")

	run := waitStressRun(t, "ctl-stress", stress.RunDone, r)
	assert.Equal(t, 2, run.Passed)
	assert.Equal(t, []string{nodes[1]}, run.FailedNodes)
	assert.Empty(t, run.Message)
	assert.Equal(t, policy.HealthDegraded, framework.Node(t, nodes[1]).Labels[policy.LabelHealth])
	assert.Regexp(t, `^npu,hccs failed at \S+: exit 1 \(Error\): hccs link 3 down$`, framework.Node(t, nodes[1]).Annotations[policy.AnnotationStressResult])
	assert.Equal(t, policy.NodeDegraded, policy.StateOfNode(framework.Node(t, nodes[1])))
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[0]).Labels[policy.LabelHealth])
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[2]).Labels[policy.LabelHealth])
	assert.Equal(t, 1, nodeEvents(t, nodes[1], "StressTestFailed"), "the run ran once")
	assert.Equal(t, map[string]int{nodes[1]: 1}, stressPods(t, "ctl-stress-"), "the failing node's pod is kept, the others' deleted")
	assert.Contains(t, r.logs.String(), "running stress tests")

	// Followed with --wait: progress, then the plugin's summary and T2.
	res := framework.C.Litepool(t, "stress", "run", "--pool", "ctl-stress", "--tests", "npu", "--image", stressImage, "--wait")
	assert.Equal(t, 1, res.ExitCode, res.Stdout+res.Stderr)
	assert.Regexp(t, `stress run \S+: done\n$`, res.Stdout)
	assert.True(t, strings.HasSuffix(res.Stderr, "pool ctl-stress: 2 passed, 1 failed, 0 skipped\nerror: [T2] 1 node(s) failed the stress test and are now runwhere.ai/health=degraded: "+nodes[1]+"\n"), res.Stderr)
	assert.Equal(t, 2, nodeEvents(t, nodes[1], "StressTestFailed"))

	// --in-cluster=false runs it in the plugin even with a controller; --wait refuses that.
	res = framework.C.Litepool(t, "stress", "run", "--pool", "ctl-stress", "--image", stressImage, "--in-cluster=false", "--wait")
	assert.NotEqual(t, 0, res.ExitCode)
	assert.Contains(t, res.Stderr, "--wait follows a stress run handed to the cluster, and this one is not (--in-cluster=false)")
}

// The leader dies while the run's pods are running: the next leader marks the run
// Interrupted and does not run it again (one pod per node in all); a new run then
// completes under the new leader.
func TestStressRunIsNeverRunTwiceAcrossALeaderChange(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	first := startReplica(t, certs)
	waitLeader(t, first)
	second := startReplica(t, certs)
	nodes := makePool(t, "ctl-sk", 2)
	var release atomic.Bool
	stopAgent := playStress(t, "ctl-sk-", map[string]string{}, &release)
	defer stopAgent()

	framework.C.MustLitepool(t, "stress", "run", "--pool", "ctl-sk", "--tests", "npu", "--image", stressImage, "--keep-pods")
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return len(stressPods(t, "ctl-sk-")) == len(nodes), nil
	}), "the first leader never started the pods:\n%s", first.logs.String())
	// One run at a time per pool.
	busy := framework.C.Litepool(t, "stress", "run", "--pool", "ctl-sk", "--tests", "npu", "--image", stressImage)
	assert.NotEqual(t, 0, busy.ExitCode)
	assert.Regexp(t, `pool ctl-sk: stress run \S+ is running in the cluster: wait until it ends`, busy.Stderr)
	first.Kill()
	waitLeader(t, second)

	run := waitStressRun(t, "ctl-sk", stress.RunInterrupted, second)
	assert.Equal(t, "the controller running it stopped (leader change); start a new run", run.Message)
	release.Store(true)
	time.Sleep(2 * time.Second) // time enough for a wrongly restarted run to create pods
	assert.Equal(t, map[string]int{nodes[0]: 1, nodes[1]: 1}, stressPods(t, "ctl-sk-"), "no node tested twice")

	res := framework.C.Litepool(t, "stress", "run", "--pool", "ctl-sk", "--tests", "npu", "--image", stressImage, "--wait")
	require.Equal(t, 0, res.ExitCode, res.Stdout+res.Stderr)
	assert.True(t, strings.HasSuffix(res.Stderr, "pool ctl-sk: 2 passed, 0 failed, 0 skipped\n"), res.Stderr)
}

// playStress plays the stress-test image on the nodes named prefix*: once release is
// set it ends each of their stress pods, Failed (exit 1, with the message) on the nodes
// in fail and Succeeded elsewhere (kwok keeps plain pods Running).
func playStress(t *testing.T, prefix string, fail map[string]string, release *atomic.Bool) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			if !release.Load() {
				continue
			}
			pods, err := framework.C.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if !strings.HasPrefix(p.Spec.NodeName, prefix) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				term := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}
				p.Status.Phase = corev1.PodSucceeded
				if msg, failing := fail[p.Spec.NodeName]; failing {
					p.Status.Phase, term.ExitCode, term.Reason, term.Message = corev1.PodFailed, 1, "Error", msg
				}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "stress", Image: p.Spec.Containers[0].Image, State: corev1.ContainerState{Terminated: term}}}
				_, _ = framework.C.Kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// waitStressRun waits until the pool's recorded run reaches state and returns it.
func waitStressRun(t *testing.T, pool, state string, r *replica) stress.Run {
	t.Helper()
	var run stress.Run
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := poolclient.New(framework.C.Dynamic).Get(ctx, pool)
		if err != nil {
			return false, err
		}
		if run, err = stress.DecodeRun(p.Annotations[stress.AnnotationRun]); err != nil {
			return false, nil
		}
		return run.State == state, nil
	})
	require.NoError(t, err, "stress run on %s: %+v, want %s\n%s", pool, run, state, r.logs.String())
	return run
}

// stressPods counts the stress pods (not being deleted) on the nodes named prefix*.
func stressPods(t *testing.T, prefix string) map[string]int {
	t.Helper()
	pods, err := framework.C.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
	require.NoError(t, err)
	out := map[string]int{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Spec.NodeName, prefix) && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

func nodeEvents(t *testing.T, node, reason string) int {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason})
	require.NoError(t, err)
	return len(list.Items)
}
