package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	oldDriver = "23.0.6"
	target    = "24.1.0.3"
	installer = "registry.example.com/ascend-installer:24.1.0.3"
)

// A pool rollout left to the cluster: the plugin creates the DriverRollout and exits
// (--wait=false), two replicas of litepool-webhook run the controllers with leader
// election, the leader is killed mid-wave, the other takes over and finishes from the
// rollout's status. Every node gets one installer Job, one cordon and one pass through
// the machine, and ends schedulable.
func TestRolloutSurvivesPluginExitAndLeaderKill(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	first := startReplica(t, certs)
	waitLeader(t, first)
	second := startReplica(t, certs)

	nodes := makePool(t, "ctl-roll", 4)
	stopAgent := playDriver(t, 3*time.Second)
	defer stopAgent()
	cordons := countCordons(t, "ctl-roll")

	res := framework.C.Litepool(t, "upgrade", "driver", "--pool", "ctl-roll", "--version", target, "--max-unavailable", "2",
		"--installer-image", installer, "--wait=false", "--yes")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Regexp(t, `driverrollout \S+: litepool's controller drives it; follow it with`, res.Stdout)
	assert.NotContains(t, res.Stderr, "this command drives it")

	// Mid-wave: a node is installing. Kill the leader there.
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		for _, n := range nodes {
			if framework.UpgradeState(t, n) == string(policy.UpgradeInstall) {
				return true, nil
			}
		}
		return false, nil
	}), "no node reached install under the first leader:\n%s", first.Logs.String())
	states := map[string]string{}
	for _, n := range nodes {
		states[n] = framework.UpgradeState(t, n)
	}
	t.Logf("killing the leader with node states %v", states)
	first.Kill()

	waitLeader(t, second)
	// The operator follows it from the plugin: status -w returns when the rollout ends.
	watched := framework.C.Litepool(t, "upgrade", "status", "--pool", "ctl-roll", "-w")
	require.Equal(t, 0, watched.ExitCode, watched.Stderr)
	assert.Regexp(t, `driverrollout \S+ \(pool ctl-roll → 24.1.0.3\): Succeeded: 4/4 done \(100%\), 0 in progress, 0 pending, 0 failed\n$`, watched.Stdout)
	// The nodes' annotations and Events follow the stored status (published once it is
	// stored), so they may trail the status the command saw.
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		for _, n := range nodes {
			if framework.UpgradeState(t, n) != string(policy.UpgradeDone) || len(eventMessages(t, n, "DriverUpgraded")) == 0 {
				return false, nil
			}
		}
		return true, nil
	}), second.Logs.String())
	for _, n := range nodes {
		assert.Len(t, eventMessages(t, n, "DriverUpgraded"), 1, "%s went through the machine once", n)
	}

	jobs := installerJobs(t)
	perNode := cordons()
	for _, n := range nodes {
		got := framework.Node(t, n)
		assert.Equal(t, target, got.Labels[framework.DriverLabel], n)
		assert.False(t, got.Spec.Unschedulable, "%s left cordoned", n)
		assert.NotContains(t, got.Annotations, policy.AnnotationWasCordoned, n)
		assert.Equal(t, 1, jobs[n], "installer Jobs of %s", n)
		assert.Equal(t, 1, perNode[n], "cordons of %s", n)
	}

	// `upgrade status` tells the same from the cluster.
	status := framework.C.MustLitepool(t, "upgrade", "status", "--pool", "ctl-roll")
	assert.Regexp(t, `driverrollout \S+ \(pool ctl-roll → 24.1.0.3\): Succeeded: 4/4 done`, status)
}

// A rollout the plugin follows (--wait, the default): it returns when the controller
// has finished, and never drives the rollout itself.
func TestInClusterRolloutWait(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	waitLeader(t, r)
	nodes := makePool(t, "ctl-wait", 2)
	stopAgent := playDriver(t, 0)
	defer stopAgent()

	res := framework.C.Litepool(t, "upgrade", "driver", "--pool", "ctl-wait", "--version", target,
		"--installer-image", installer, "--in-cluster", "-w", "--yes")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Empty(t, res.Stderr)
	assert.Regexp(t, `driverrollout \S+ \(pool ctl-wait → 24.1.0.3\): Succeeded: 2/2 done \(100%\), 0 in progress, 0 pending, 0 failed\n`, res.Stdout)
	assert.Regexp(t, `driverrollout \S+: Succeeded: 2/2 nodes at 24.1.0.3\n$`, res.Stdout)
	for _, n := range nodes {
		framework.WaitUpgradeState(t, n, string(policy.UpgradeDone))
		assert.False(t, framework.Node(t, n).Spec.Unschedulable)
	}

	res = framework.C.Litepool(t, "upgrade", "driver", "--pool", "ctl-wait", "--version", "24.1.0.5", "--wait=false", "-w", "--yes")
	assert.NotEqual(t, 0, res.ExitCode)
	assert.Contains(t, res.Stderr, "--watch prints the moves of a rollout it follows: it does not go with --wait=false")
}

// waitLeader waits until the replica says it holds the leader lease.
func waitLeader(t *testing.T, r *replica) { r.WaitLeader(t, waitTimeout) }

// installerJobs counts installer Jobs per node, from the cluster.
func installerJobs(t *testing.T) map[string]int {
	t.Helper()
	list, err := framework.C.Kube.BatchV1().Jobs(localwebhook.Namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
	require.NoError(t, err)
	out := map[string]int{}
	for _, j := range list.Items {
		out[j.Spec.Template.Spec.NodeName]++
	}
	return out
}

// countCordons watches the pool's nodes and counts, per node, how often it went from
// schedulable to unschedulable: the cluster's own account.
func countCordons(t *testing.T, pool string) func() map[string]int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sel := policy.LabelPool + "=" + pool
	list, err := framework.C.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	require.NoError(t, err)
	var mu sync.Mutex
	now, count := map[string]bool{}, map[string]int{}
	for _, n := range list.Items {
		now[n.Name] = n.Spec.Unschedulable
	}
	w, err := framework.C.Kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Error {
				continue
			}
			mu.Lock()
			if !now[n.Name] && n.Spec.Unschedulable {
				count[n.Name]++
			}
			now[n.Name] = n.Spec.Unschedulable
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range count {
			out[k] = v
		}
		return out
	}
}

// A node of a rollout fails validation: the controller stops there, leaves the node
// cordoned and failed; `upgrade resume --retry-failed` raises spec.retryFailed, and the
// controller runs the node again, with a fresh installer Job, to the end.
func TestInClusterRolloutRetryFailed(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	waitLeader(t, r)
	nodes := makePool(t, "ctl-fail", 1)
	silent := playDriver(t, time.Hour) // the installer "succeeds", the driver never reports
	res := framework.C.Litepool(t, "upgrade", "driver", "--pool", "ctl-fail", "--version", target, "--installer-image", installer,
		"--validate-timeout", "2s", "--in-cluster", "--wait", "--yes")
	silent()
	assert.Equal(t, 1, res.ExitCode, res.Stdout)
	assert.Regexp(t, `error: driverrollout \S+ failed: stopped, 0/1 done: node ctl-fail-1 failed in validate`, res.Stderr)
	framework.WaitUpgradeState(t, nodes[0], string(policy.UpgradeFailed))
	assert.True(t, framework.Node(t, nodes[0]).Spec.Unschedulable, "a failed node stays cordoned for the operator")

	stopAgent := playDriver(t, 0)
	defer stopAgent()
	res = framework.C.Litepool(t, "upgrade", "resume", "--pool", "ctl-fail", "--retry-failed")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Empty(t, res.Stderr, "the controller drives it, not the command")
	assert.Contains(t, res.Stdout, "node/ctl-fail-1: failed → upgrade-required (retry)\n")
	assert.Regexp(t, `driverrollout \S+: Succeeded: 1/1 nodes at 24.1.0.3\n$`, res.Stdout)
	assert.Equal(t, target, framework.Node(t, nodes[0]).Labels[framework.DriverLabel])
	assert.False(t, framework.Node(t, nodes[0]).Spec.Unschedulable)
	assert.Equal(t, 2, installerJobs(t)[nodes[0]], "the retry ran a fresh installer Job (attempt 2), once")
}

// makePool creates a Pool object and n Ready Snt9B nodes NAME-1..n at oldDriver.
func makePool(t *testing.T, name string, n int) []string {
	return framework.AscendPool(t, name, n, oldDriver, v1alpha1.SoftwareSpec{CANN: "8.2.RC1"})
}

// playDriver plays the driver after an install: installs take delay.
func playDriver(_ *testing.T, delay time.Duration) func() {
	return framework.StartDriverAgent(delay).Stop
}
