package realnode

// The rollout under a leader change is kept to this file: litepool's in-cluster rollout
// is driven through the plugin (`kubectl litepool upgrade driver`), which hands it to
// the controller in the litepool pods when one holds the Lease litepool-controller.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	leaseName     = "litepool-controller"
	rolloutPool   = "rn-roll"
	rolloutTarget = "24.1.0.3"
)

// leader is the pod holding the controllers' Lease (its identity starts with the pod's
// name, which is its hostname).
func leader(t *testing.T) string {
	l, err := framework.C.Kube.CoordinationV1().Leases(system).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	id := *l.Spec.HolderIdentity
	if i := strings.Index(id, "_"); i > 0 {
		id = id[:i]
	}
	return id
}

// testLeaderKilledMidRollout: a pool rollout handed to the controller; the leader pod is
// killed (no grace) while a node installs; another pod takes the Lease and finishes the
// rollout, and every node was upgraded once: one installer pod, one installer Job, one
// DriverUpgraded event.
func testLeaderKilledMidRollout(t *testing.T) {
	c := framework.C
	kube := c.Kube
	var first string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		first = leader(t)
		return first != "", nil
	}), "no litepool pod holds the Lease %s/%s", system, leaseName)

	// kwok's nodes: a real node's drain would evict litepool itself. The agent plays
	// their installers (kwok runs no containers).
	nodes := framework.AscendPool(t, rolloutPool, 4, "24.1.rc2", v1alpha1.SoftwareSpec{})
	agent := framework.StartDriverAgent(4 * time.Second)
	defer agent.Stop()

	out := c.MustLitepool(t, "upgrade", "driver", "--pool", rolloutPool, "--version", rolloutTarget, "--max-unavailable", "2",
		"--installer-image", installerOK, "--yes", "--wait=false")
	assert.Contains(t, out, "litepool's controller drives it")

	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		for _, n := range nodes {
			if framework.UpgradeState(t, n) == string(policy.UpgradeInstall) {
				return true, nil
			}
		}
		return false, nil
	}), "no node reached install under the first leader")
	t.Logf("killing leader pod %s", first)
	require.NoError(t, kube.CoreV1().Pods(system).Delete(ctx, first, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}))

	var next string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		next = leader(t)
		return next != "" && next != first, nil
	}), "no other pod took the Lease")
	watched := c.Litepool(t, "upgrade", "status", "--pool", rolloutPool, "-w")
	require.Equal(t, 0, watched.ExitCode, watched.Stderr)
	assert.Regexp(t, `4/4 done \(100%\), 0 in progress, 0 pending, 0 failed`, watched.Stdout)

	jobs, err := kube.BatchV1().Jobs(system).List(ctx, metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
	require.NoError(t, err)
	perNode := map[string]int{}
	for _, j := range jobs.Items {
		perNode[j.Spec.Template.Spec.NodeName]++
	}
	// A node's annotations and Event are published right after the status that records
	// its move is stored: the status can read Succeeded a moment before the last ones.
	var events map[string]int
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		events = countEvents(t, "DriverUpgraded")
		for _, n := range nodes {
			if events[n] == 0 || framework.UpgradeState(t, n) != string(policy.UpgradeDone) {
				return false, nil
			}
		}
		return true, nil
	}), "every node's DriverUpgraded event and done annotation: %v", events)
	for _, n := range nodes {
		got := framework.Node(t, n)
		assert.Equal(t, string(policy.UpgradeDone), got.Annotations[policy.AnnotationUpgradeState], n)
		assert.Equal(t, rolloutTarget, got.Labels[framework.DriverLabel], n)
		assert.False(t, got.Spec.Unschedulable, "%s left cordoned", n)
		assert.Equal(t, 1, perNode[n], "installer Jobs of %s", n)
		assert.Equal(t, 1, agent.InstallerPods(n), "installer pods of %s", n)
		assert.Equal(t, 1, events[n], "DriverUpgraded events of %s", n)
	}
	waitAvailable(t, 3*time.Minute)
}

// countEvents counts the Events of reason on each node. litepool records one Event
// per step (never aggregated), and the pool's nodes are new: every one counts.
func countEvents(t *testing.T, reason string) map[string]int {
	list, err := framework.C.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.kind=Node"})
	require.NoError(t, err)
	per := map[string]int{}
	for _, e := range list.Items {
		per[e.InvolvedObject.Name]++
	}
	return per
}
