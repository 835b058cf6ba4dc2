package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// The old protocol's orders, written into a node's annotations by anyone who may patch
// nodes, make the controller do nothing: it acts on DriverRollout objects only.
func TestNodeAnnotationsAreNoOrder(t *testing.T) {
	n := node("a", "p", 8, true)
	n.Annotations = map[string]string{
		policy.AnnotationUpgradeRun:   `{"id":"r1","pool":"p","target":"2.0","installerImage":"evil:1","namespace":"kube-system","inCluster":true}`,
		policy.AnnotationUpgradeState: string(policy.UpgradeInstall), policy.AnnotationUpgradeTarget: "2.0",
	}
	_, c, _ := newReconciler(t, n)
	kube := kubefake.NewClientset(n.DeepCopy())
	r := &RolloutReconciler{Reconciler: upgrade.Reconciler{Client: c, Kube: kube, Namespace: "litepool-system"}}
	for _, name := range []string{"r1", "a", "p"} {
		res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		require.NoError(t, err)
		assert.Zero(t, res)
	}
	jobs, err := kube.BatchV1().Jobs("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, jobs.Items)
	got, err := kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, got.Spec.Unschedulable)
}
