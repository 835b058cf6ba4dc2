package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// A real rollout of pool p to 2.0 whose nodes' annotations lie: the old protocol's
// orders, written by anyone who may patch nodes, say node a is already installing
// another image in kube-system, and node b (already at 2.0) is in run r1 too. The
// controller takes each node's state from the rollout's status only: a is cordoned
// and gets the rollout's installer in litepool's namespace; b is left alone; a
// request for the run the annotations name does nothing.
func TestARolloutIgnoresNodeAnnotationsThatLie(t *testing.T) {
	lie := map[string]string{
		policy.AnnotationUpgradeRun:   `{"id":"r1","pool":"p","target":"2.0","installerImage":"evil:1","namespace":"kube-system","inCluster":true}`,
		policy.AnnotationUpgradeState: string(policy.UpgradeInstall), policy.AnnotationUpgradeTarget: "2.0",
	}
	a, b := node("a", "p", 8, true), node("b", "p", 8, true)
	a.Labels[policy.LabelDriverVersion], b.Labels[policy.LabelDriverVersion] = "1.0", "2.0"
	a.Annotations, b.Annotations = lie, lie
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "ro-uid", Generation: 1},
		Spec: v1alpha1.DriverRolloutSpec{Pool: "p", Version: "2.0", Installer: v1alpha1.DriverInstaller{Image: "inst:2"},
			WaitTimeout: &metav1.Duration{}}}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ro).WithStatusSubresource(&v1alpha1.DriverRollout{}).Build()
	kube := kubefake.NewClientset(a, b)
	r := &RolloutReconciler{Reconciler: upgrade.Reconciler{Client: c, Kube: kube, Namespace: "litepool-system"}}
	ctx := context.Background()
	for _, name := range []string{"r1", "a", "p"} {
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		require.NoError(t, err)
		assert.Zero(t, res, "no rollout is named %s", name)
	}
	jobs, err := kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, jobs.Items, "an annotation orders nothing")

	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "ro"}})
	require.NoError(t, err)
	var got v1alpha1.DriverRollout
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "ro"}, &got))
	require.Len(t, got.Status.Nodes, 1, "b is at 2.0 whatever its annotations say: not in the rollout")
	assert.Equal(t, "a", got.Status.Nodes[0].Name)
	assert.Equal(t, string(policy.UpgradeInstall), got.Status.Nodes[0].State, got.Status.Nodes[0].Message)
	jobs, err = kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1)
	job := jobs.Items[0]
	assert.Equal(t, "litepool-system", job.Namespace, "not the annotation's kube-system")
	assert.Equal(t, "a", job.Spec.Template.Spec.NodeName)
	assert.Equal(t, "inst:2", job.Spec.Template.Spec.Containers[0].Image, "the rollout's installer, not the annotation's")
	for name, cordoned := range map[string]bool{"a": true, "b": false} {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, cordoned, n.Spec.Unschedulable, "node %s: a is cordoned before its install, as the status (not the annotation's 'install') says", name)
	}
}
