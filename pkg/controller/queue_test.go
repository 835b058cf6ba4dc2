package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/queue"
)

// recordingAdapter stands in for a scheduler: it records what it was asked to write.
type recordingAdapter struct {
	capacity   policy.Capacity
	namespaces []string
	err        error
	removed    int
}

func (a *recordingAdapter) Sync(_ context.Context, pool *v1alpha1.Pool, c policy.Capacity, namespaces []string, _ bool) (*v1alpha1.QueueStatus, error) {
	a.capacity, a.namespaces = c, namespaces
	if a.err != nil && queue.IsNotInstalled(a.err) {
		return nil, a.err
	}
	return &v1alpha1.QueueStatus{Scheduler: v1alpha1.QueueKueue, ClusterQueue: pool.Name, Resource: c.Resource, Quota: c.Accelerators,
		SchedulableNodes: int32(len(c.Nodes)), Namespaces: namespaces}, a.err
}

func (a *recordingAdapter) Remove(context.Context, *v1alpha1.Pool) error { a.removed++; return nil }

func TestQueueReconcilerWritesCapacityAndStatus(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train", Generation: 1},
		Spec: v1alpha1.PoolSpec{Namespaces: []string{"team-a"}, Queue: &v1alpha1.QueueSpec{Headroom: 2}}}
	quarantined := node("n3", "train", 8, true)
	quarantined.Spec.Taints = []corev1.Taint{policy.QuarantineTaint("DeviceUnhealthy")}
	_, c, _ := newReconciler(t, pool, node("n1", "train", 8, true), node("n2", "train", 8, true), quarantined,
		node("x1", "other", 8, true), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	a := &recordingAdapter{}
	r := &QueueReconciler{Client: c, Adapters: map[v1alpha1.QueueScheduler]queue.Adapter{v1alpha1.QueueKueue: a}}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "train"}}

	res, err := r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, QueueResync, res.RequeueAfter)
	assert.EqualValues(t, 14, a.capacity.Accelerators, "two healthy members of 8, less headroom 2")
	assert.Equal(t, map[string]string{"n3": policy.OutQuarantined}, a.capacity.Out)
	assert.Equal(t, []string{"team-a"}, a.namespaces)
	got := getPool(t, c, "train")
	require.NotNil(t, got.Status.Queue)
	assert.EqualValues(t, 14, got.Status.Queue.Quota)
	cond := apimeta.FindStatusCondition(got.Status.Conditions, ConditionQueue)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Contains(t, cond.Message, "quota 14 nvidia.com/gpu from 2 of 3 members, less headroom 2 (1 held out")

	// The quarantined node returns: the quota moves, and an Event says how and why.
	rec := events.NewFakeRecorder(5)
	r.Recorder = rec
	n3 := &corev1.Node{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "n3"}, n3))
	n3.Spec.Taints = nil
	require.NoError(t, c.Update(context.Background(), n3))
	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{"Normal QueueQuotaChanged Kueue queue train: quota 14 -> 22 nvidia.com/gpu (3 schedulable members; none held out)"}, drain(rec))
	n3.Spec.Unschedulable = true
	require.NoError(t, c.Update(context.Background(), n3))
	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{"Normal QueueQuotaChanged Kueue queue train: quota 22 -> 14 nvidia.com/gpu (2 schedulable members; held out: n3 Cordoned)"}, drain(rec))

	// Kueue missing: the condition says so, status.queue is empty, nothing else moves.
	a.err = &queue.NotInstalledError{Scheduler: v1alpha1.QueueKueue, API: "kueue.x-k8s.io/v1beta2 ClusterQueue"}
	res, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, notInstalledRetry, res.RequeueAfter)
	got = getPool(t, c, "train")
	assert.Nil(t, got.Status.Queue)
	cond = apimeta.FindStatusCondition(got.Status.Conditions, ConditionQueue)
	assert.Equal(t, ReasonQueueNotInstalled, cond.Reason)
	assert.Contains(t, cond.Message, "Kueue is not installed")

	// Turned off: the adapter removes what the pool owns; status forgets the queue.
	a.err = nil
	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	got = getPool(t, c, "train")
	got.Spec.Queue = nil
	require.NoError(t, c.Update(context.Background(), got))
	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, a.removed)
	got = getPool(t, c, "train")
	assert.Nil(t, got.Status.Queue)
	assert.Nil(t, apimeta.FindStatusCondition(got.Status.Conditions, ConditionQueue))
}

func TestCapacityChangedIgnoresHeartbeats(t *testing.T) {
	a := node("n1", "train", 8, true)
	b := a.DeepCopy()
	b.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	assert.False(t, capacityChanged(a, b))
	b.Spec.Taints = []corev1.Taint{policy.QuarantineTaint("NotReady")}
	assert.True(t, capacityChanged(a, b))
	b = a.DeepCopy()
	b.Labels[policy.LabelPool] = "other"
	assert.True(t, capacityChanged(a, b))
}

func TestQueueInputsChangedIgnoresTheOtherStatus(t *testing.T) {
	a := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	b := a.DeepCopy()
	b.Status.AcceleratorTotal = 8
	assert.False(t, queueInputsChanged(a, b), "the status controller's figures")
	b.Status.Queue = &v1alpha1.QueueStatus{Quota: 1000}
	assert.True(t, queueInputsChanged(a, b), "a forged status.queue is put back")
	b = a.DeepCopy()
	b.Generation = 2
	assert.True(t, queueInputsChanged(a, b))
}

// TestQueueReconcilerCountsDRADevices: with spec.queue.devices, the capacity handed to
// the adapter counts the DeviceClass's devices in the cache's ResourceSlices on the
// schedulable members only; without DRA served, none.
func TestQueueReconcilerCountsDRADevices(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train", Generation: 1},
		Spec: v1alpha1.PoolSpec{Queue: &v1alpha1.QueueSpec{Devices: &v1alpha1.QueueDevices{Resource: "example.com/gpu",
			DeviceClassNames: []string{"gpu.example.com"}}}}}
	cordoned := node("n3", "train", 0, true)
	cordoned.Spec.Unschedulable = true
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}}}
	slice := func(node string, devices int) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
		for i := 0; i < devices; i++ {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
		}
		return s
	}
	_, c, _ := newReconciler(t, pool, node("n1", "train", 0, true), node("n2", "train", 0, true), cordoned, node("x1", "other", 0, true),
		class, slice("n1", 8), slice("n2", 4), slice("n3", 8), slice("x1", 8))
	a := &recordingAdapter{}
	r := &QueueReconciler{Client: c, DRA: true, Adapters: map[v1alpha1.QueueScheduler]queue.Adapter{v1alpha1.QueueKueue: a}}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "train"}})
	require.NoError(t, err)
	assert.Equal(t, corev1.ResourceName("example.com/gpu"), a.capacity.DeviceResource)
	assert.EqualValues(t, 12, a.capacity.Devices, "n1's 8 and n2's 4; not the cordoned n3's, not the other pool's")

	// The driver moves resource pool n2 to a newer generation whose slice is on a
	// non-member: n2's older slice no longer counts, as the scheduler no longer reads it.
	moved := slice("x1", 2)
	moved.Name, moved.Spec.Pool = "n2-gen2", resourcev1.ResourcePool{Name: "n2", Generation: 2, ResourceSliceCount: 1}
	require.NoError(t, c.Create(context.Background(), moved))
	_, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "train"}})
	require.NoError(t, err)
	assert.EqualValues(t, 8, a.capacity.Devices, "only n1's 8")

	r.DRA = false
	_, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "train"}})
	require.NoError(t, err)
	assert.Zero(t, a.capacity.Devices, "a cluster that does not serve DRA: no devices")
}
