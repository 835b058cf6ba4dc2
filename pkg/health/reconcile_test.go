package health

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// poolP1 is the request of pool p1.
var poolP1 = reconcile.Request{NamespacedName: client.ObjectKey{Name: "p1"}}

func member(name string, alloc string) *corev1.Node {
	capacity := corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "p1"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse(alloc)},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func setup(t *testing.T, images []string, nodes ...*corev1.Node) (*Reconciler, *kubefake.Clientset) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Spec: v1alpha1.PoolSpec{
		Health: &v1alpha1.HealthPolicy{}, StressTest: &v1alpha1.StressTestSpec{Image: "registry.example.com/stress:1"}}}
	objs := []client.Object{pool}
	var kobjs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, n.DeepCopy())
		kobjs = append(kobjs, n.DeepCopy())
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Pool{}, &corev1.Node{}).Build()
	kube := kubefake.NewClientset(kobjs...)
	return &Reconciler{Client: c, Kube: kube, Namespace: "litepool-system", Images: images, Now: func() time.Time { return now }}, kube
}

func TestReconcileQuarantinesThenRechecks(t *testing.T) {
	r, kube := setup(t, []string{"registry.example.com/"}, member("n1", "7"), member("n2", "8"), member("n3", "8"), member("n4", "8"))
	ctx := context.Background()
	_, err := r.Reconcile(ctx, poolP1)
	require.NoError(t, err)
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	require.Len(t, pool.Status.NodeHealth, 1)
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, pool.Status.NodeHealth[0].State)
	assert.Equal(t, int32(1), pool.Status.QuarantinedNodes)
	n1, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.Taint{{Key: policy.TaintQuarantine, Value: "DeviceUnhealthy", Effect: corev1.TaintEffectNoSchedule,
		TimeAdded: &metav1.Time{Time: now}}}, n1.Spec.Taints, "stamped with when the quarantine began, which a release is compared with")
	assert.False(t, n1.Spec.Unschedulable)

	// The device comes back: a StressRun for n1 alone is created.
	var node corev1.Node
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "n1"}, &node))
	node.Status.Allocatable["huawei.com/Ascend910"] = resource.MustParse("8")
	require.NoError(t, r.Client.Status().Update(ctx, &node))
	_, err = r.Reconcile(ctx, poolP1)
	require.NoError(t, err)
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	e := pool.Status.NodeHealth[0]
	assert.Equal(t, v1alpha1.NodeHealthRechecking, e.State)
	var run v1alpha1.StressRun
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: e.StressRun}, &run))
	assert.Equal(t, []string{"n1"}, run.Spec.Nodes)
	assert.Equal(t, "registry.example.com/stress:1", run.Spec.Image)
	assert.True(t, Selector().Matches(labels.Set(run.Labels)))
}

func TestReconcileHoldsOutWhenTheImageIsNotApproved(t *testing.T) {
	r, _ := setup(t, nil, member("n1", "8"), member("n2", "8"))
	ctx := context.Background()
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	pool.Status.NodeHealth = []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthQuarantined, Reason: policy.SignalDeviceUnhealthy}}
	require.NoError(t, r.Client.Status().Update(ctx, &pool))
	_, err := r.Reconcile(ctx, poolP1)
	require.NoError(t, err)
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	e := pool.Status.NodeHealth[0]
	assert.Equal(t, v1alpha1.NodeHealthHeldOut, e.State)
	assert.Equal(t, ReasonImageNotApproved, e.Reason)
	assert.Contains(t, e.Message, "--health-images")
	var runs v1alpha1.StressRunList
	require.NoError(t, r.Client.List(ctx, &runs))
	assert.Empty(t, runs.Items, "no unapproved image runs")
}

func TestRecheckRunAndJobNamesFit(t *testing.T) {
	long := "a-very-long-node-name-that-goes-on-and-on-and-on-beyond-sixty-three-chars.example.com"
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p1", UID: "u1"}}
	name := RecheckRunName(pool, long, "k")
	assert.LessOrEqual(t, len(name), 63)
	assert.Equal(t, name, RecheckRunName(pool, long, "k"))
	assert.NotEqual(t, name, RecheckRunName(pool, long, "k2"))
	r := &Reconciler{Namespace: "ns", Definitions: map[string]Definition{"reset": {Image: "reset:1"}}}
	spec, err := r.remediation(pool, &v1alpha1.NodeHealthStatus{Node: long}, &v1alpha1.RemediationSpec{Definition: "reset"})
	require.NoError(t, err)
	j := nodejob.Job(spec, "ns", time.Hour)
	assert.LessOrEqual(t, len(j.Name), 63)
	assert.Equal(t, long, j.Spec.Template.Spec.NodeName)
}

// A device its driver taints in a ResourceSlice is a fault of its node, when the
// cluster serves DRA; with DRA off the same slice is not read.
func TestReconcileQuarantinesOnDRADeviceTaint(t *testing.T) {
	for _, dra := range []bool{true, false} {
		r, kube := setup(t, nil, member("n1", "8"), member("n2", "8"), member("n3", "8"), member("n4", "8"))
		r.DRA = dra
		ctx := context.Background()
		n1 := "n1"
		require.NoError(t, r.Client.Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpu"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &n1, Pool: resourcev1.ResourcePool{Name: "n1", ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-3", Taints: []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoExecute}}}}}}))
		_, err := r.Reconcile(ctx, poolP1)
		require.NoError(t, err)
		var pool v1alpha1.Pool
		require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
		node, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		require.NoError(t, err)
		if !dra {
			assert.Empty(t, pool.Status.NodeHealth, "DRA off: slices are not read")
			continue
		}
		require.Len(t, pool.Status.NodeHealth, 1)
		e := pool.Status.NodeHealth[0]
		assert.Equal(t, v1alpha1.NodeHealthQuarantined, e.State)
		assert.Equal(t, policy.SignalDeviceTaint, e.Reason)
		assert.Contains(t, e.Message, "gpu.nvidia.com/n1/gpu-3")
		assert.True(t, hasTaint(node, true, policy.SignalDeviceTaint), "taints: %v", node.Spec.Taints)
	}
}
