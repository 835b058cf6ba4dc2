package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

func marked(name string, run policy.UpgradeRun, state policy.UpgradeState) *corev1.Node {
	n := node(name, run.Pool, 8, true)
	n.Annotations = map[string]string{policy.AnnotationUpgradeRun: run.Encode(), policy.AnnotationUpgradeState: string(state)}
	return n
}

func TestActiveRolloutMapsOnlyInClusterNodesWithWorkLeft(t *testing.T) {
	run := policy.UpgradeRun{ID: "r1", Pool: "p", Target: "2.0", InCluster: true}
	local := run
	local.InCluster = false
	assert.Equal(t, []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "r1"}}},
		activeRollout(context.Background(), marked("a", run, policy.UpgradeInstall)))
	assert.Empty(t, activeRollout(context.Background(), marked("b", run, policy.UpgradeDone)))
	assert.Empty(t, activeRollout(context.Background(), marked("c", run, policy.UpgradeFailed)))
	assert.Empty(t, activeRollout(context.Background(), marked("d", local, policy.UpgradeInstall)),
		"a rollout the plugin drives itself is not the controller's")
	assert.Empty(t, activeRollout(context.Background(), node("e", "p", 8, true)))
}

func TestReconcileStartsARolloutOnceAndNotAfterAFailure(t *testing.T) {
	run := policy.UpgradeRun{ID: "r1", Pool: "p", Target: "2.0", InCluster: true}
	failedRun := policy.UpgradeRun{ID: "r2", Pool: "q", Target: "2.0", InCluster: true}
	_, c, _ := newReconciler(t, marked("a", run, policy.UpgradeRequired), marked("b", run, policy.UpgradeDone),
		marked("x", failedRun, policy.UpgradeFailed), marked("y", failedRun, policy.UpgradeRequired))
	r := &RolloutReconciler{Client: c, Recheck: time.Minute, running: map[string]bool{}}
	// r1 counts as running already: Reconcile must not start a second Rollout of it.
	r.running["r1"] = true
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "r1"}})
	require.NoError(t, err)
	assert.Equal(t, time.Minute, res.RequeueAfter, "an active rollout is looked at again")
	assert.True(t, r.running["r1"])

	res, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "r2"}})
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter)
	assert.False(t, r.running["r2"], "a rollout stopped on a failed node waits for resume --retry-failed")

	res, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "gone"}})
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter)
}
