package controller

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func node(name, pool string, gpus int64, ready bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if pool != "" {
		n.Labels[policy.LabelPool] = pool
	}
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

func pod(name, nodeName string, gpus string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ai"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func newReconciler(t *testing.T, objs ...client.Object) (*StatusReconciler, client.Client, *events.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Pool{}).Build()
	rec := events.NewFakeRecorder(20)
	now := time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC)
	return &StatusReconciler{Client: c, Recorder: rec, now: func() time.Time { return now }}, c, rec
}

func getPool(t *testing.T, c client.Client, name string) *v1alpha1.Pool {
	t.Helper()
	var p v1alpha1.Pool
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: name}, &p))
	return &p
}

func TestReconcileWritesStatusGaugesAndEvents(t *testing.T) {
	train := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train", Generation: 2}, Spec: v1alpha1.PoolSpec{MinNodes: 2}}
	r, c, rec := newReconciler(t, train,
		node("n1", "train", 8, true), node("n2", "train", 8, false), node("l1", "labels-only", 4, true),
		pod("a", "n1", "3"), pod("b", "n2", "8"), pod("c", "l1", "1"))
	ctx := context.Background()
	res, err := r.Reconcile(ctx, everyPool)
	require.NoError(t, err)
	// A pass asks for the next one: the sync timestamp advances in a quiet cluster.
	assert.Equal(t, StatusResync, res.RequeueAfter)

	s := getPool(t, c, "train").Status
	assert.Equal(t, []int64{16, 11, 5}, []int64{s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree},
		"NotReady n2 and its pod count in total and used, nothing in free")
	assert.Equal(t, map[string]int32{"Running": 1, "NotReady": 1}, s.NodeStates)
	assert.Equal(t, int64(2), s.ObservedGeneration)
	require.NotNil(t, s.ObservedAt)
	for typ, want := range map[string]metav1.ConditionStatus{
		inventory.ConditionDegraded: metav1.ConditionTrue, inventory.ConditionBelowMinNodes: metav1.ConditionTrue,
		inventory.ConditionUpgrading: metav1.ConditionFalse} {
		cond := apimeta.FindStatusCondition(s.Conditions, typ)
		require.NotNil(t, cond, typ)
		assert.Equal(t, want, cond.Status, typ)
	}
	assert.Len(t, rec.Events, 2, "Degraded and BelowMinNodes turned True")
	evs := drain(rec)
	assert.Contains(t, strings.Join(evs, "\n"), "Warning DegradedTrue")
	assert.Contains(t, strings.Join(evs, "\n"), "Warning BelowMinNodesTrue")

	assert.Equal(t, 16.0, testutil.ToFloat64(acceleratorsTotal.WithLabelValues("train", "nvidia.com/gpu")))
	assert.Equal(t, 5.0, testutil.ToFloat64(acceleratorsFree.WithLabelValues("train", "nvidia.com/gpu")))
	assert.Equal(t, 1.0, testutil.ToFloat64(acceleratorsUsed.WithLabelValues("labels-only", "nvidia.com/gpu")),
		"label-only pools have gauges, not status")
	assert.Equal(t, 1.0, testutil.ToFloat64(poolNodes.WithLabelValues("train", "NotReady")))
	assert.Equal(t, 1.0, testutil.ToFloat64(poolCondition.WithLabelValues("train", inventory.ConditionBelowMinNodes)))
	assert.Equal(t, 2.0, testutil.ToFloat64(minNodes.WithLabelValues("train")))

	// Nothing changed: no write, no Event, same ObservedAt.
	before := getPool(t, c, "train")
	r.now = func() time.Time { return time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) }
	_, err = r.Reconcile(ctx, everyPool)
	require.NoError(t, err)
	after := getPool(t, c, "train")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion)
	assert.Empty(t, drain(rec))

	// n2 comes back: Degraded and BelowMinNodes turn False, with Normal Events; the
	// label-only pool's node leaves: its series go.
	require.NoError(t, c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}))
	require.NoError(t, c.Create(ctx, node("n2", "train", 8, true)))
	require.NoError(t, c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "l1"}}))
	_, err = r.Reconcile(ctx, everyPool)
	require.NoError(t, err)
	s = getPool(t, c, "train").Status
	assert.Equal(t, []int64{16, 11, 5}, []int64{s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree})
	assert.Equal(t, metav1.ConditionFalse, apimeta.FindStatusCondition(s.Conditions, inventory.ConditionDegraded).Status)
	evs = drain(rec)
	assert.Len(t, evs, 2)
	assert.Contains(t, strings.Join(evs, "\n"), "Normal DegradedFalse")
	assert.Equal(t, []string{"default", "train"}, seriesPools(t, acceleratorsUsed), "the labels-only pool's series are gone")
}

// seriesPools lists the pool label of every series of a gauge, sorted.
func seriesPools(t *testing.T, g prometheus.Collector) []string {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	g.Collect(ch)
	close(ch)
	var pools []string
	for m := range ch {
		var d dto.Metric
		require.NoError(t, m.Write(&d))
		for _, l := range d.GetLabel() {
			if l.GetName() == "pool" {
				pools = append(pools, l.GetValue())
			}
		}
	}
	sort.Strings(pools)
	return pools
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestPredicatesIgnoreHeartbeatsAndStatusWrites(t *testing.T) {
	a := node("n", "p", 8, true)
	b := a.DeepCopy()
	b.ResourceVersion = "2"
	assert.False(t, nodeChanged(a, b))
	b.Status.Conditions[0].Status = corev1.ConditionFalse
	assert.True(t, nodeChanged(a, b))
	b = a.DeepCopy()
	b.Spec.Unschedulable = true
	assert.True(t, nodeChanged(a, b))
	b = a.DeepCopy()
	b.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}
	assert.True(t, nodeChanged(a, b), "a taint moves a domain's figures (status.topology)")
	b = a.DeepCopy()
	b.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")}
	assert.True(t, nodeChanged(a, b), "capacity makes a domain mixed")

	p := pod("x", "", "1")
	q := p.DeepCopy()
	q.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady}}
	entry := func(p *corev1.Pod) *podindex.Entry { return podindex.Compact(p, &policy.Accelerators{}) }
	assert.False(t, podChanged(entry(p), entry(q)))
	q.Spec.NodeName = "n"
	assert.True(t, podChanged(entry(p), entry(q)))
	q = p.DeepCopy()
	q.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("2")
	assert.True(t, podChanged(entry(p), entry(q)), "a request resized in place")

	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	withStatus := pool.DeepCopy()
	withStatus.Status.AcceleratorTotal = 8
	assert.False(t, poolSpecChanged(pool, withStatus))
	withStatus.Generation = 2
	assert.True(t, poolSpecChanged(pool, withStatus))
}

func TestCacheTransformKeepsWhatTheInventoryReads(t *testing.T) {
	base := func(in any) (any, error) { // like admission's: metadata only
		return &corev1.Node{ObjectMeta: in.(*corev1.Node).ObjectMeta}, nil
	}
	by := CacheByObject(map[client.Object]cache.ByObject{&corev1.Node{}: {Transform: base}}, policy.Accelerators{})
	require.Len(t, by, 1)
	for _, o := range by {
		in := node("n", "p", 8, true)
		in.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("96")
		in.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
		in.Status.Conditions = append(in.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure,
			LastHeartbeatTime: metav1.Now()})
		out, err := o.Transform(in)
		require.NoError(t, err)
		got := out.(*corev1.Node)
		assert.True(t, policy.IsNodeReady(got))
		_, total := policy.Accelerators{}.NodeAccelerators(got)
		assert.Equal(t, int64(8), total)
		assert.Len(t, got.Status.Allocatable, 2, "accelerators, and cpu for a pool's queue; pods dropped")
		assert.Equal(t, "96", got.Status.Allocatable.Cpu().String())
		require.Len(t, got.Status.Conditions, 2, "the health loop reads every condition (pkg/health)")
		assert.True(t, got.Status.Conditions[1].LastHeartbeatTime.IsZero(), "heartbeats are dropped")
	}
}

type sliceStore []any

// entryOf is the pod as the controller's pod index keeps it.
func entryOf(o client.Object) *podindex.Entry {
	return podindex.Compact(o.(*corev1.Pod), &policy.Accelerators{})
}

func (s sliceStore) List() []any { return s }

// Reading the informers' stores in place gives what listing through the client gives.
func TestInventoryFromStoresEqualsInventoryFromLists(t *testing.T) {
	objs := []client.Object{node("n1", "train", 8, true), node("n2", "train", 8, false), pod("a", "n1", "3"), pod("b", "n2", "8")}
	r, _, _ := newReconciler(t, objs...)
	fromLists, err := r.inventory(context.Background(), nil)
	require.NoError(t, err)
	r.Pods, r.Nodes = sliceStore{entryOf(objs[2]), entryOf(objs[3])}, sliceStore{objs[0], objs[1]}
	fromStores, err := r.inventory(context.Background(), nil)
	require.NoError(t, err)
	for _, inv := range []*inventory.Inventory{fromLists, fromStores} {
		train := inv.Pools["train"]
		assert.Equal(t, []int64{16, 11, 5}, []int64{train.Total, train.Used, train.Free}, "n2 is NotReady: in the total and used, not in free")
	}
	assert.Equal(t, len(fromLists.Nodes), len(fromStores.Nodes))
}

// An extra accelerator survives the node cache's trim and the pod index and is counted in
// the Pool's status only when the controller is told it is one, the same set for the
// trim, the index and the inventory.
func TestExtraAcceleratorCountedOnlyWhenConfigured(t *testing.T) {
	xpu := corev1.ResourceName("vendor.example/xpu")
	base := func(in any) (any, error) { // like admission's: metadata only
		switch o := in.(type) {
		case *corev1.Node:
			return &corev1.Node{ObjectMeta: o.ObjectMeta}, nil
		}
		return in, nil
	}
	for _, tc := range []struct {
		name        string
		accel       policy.Accelerators
		total, used int64
	}{
		{"configured", policy.NewAccelerators(xpu), 8, 3},
		{"default set", policy.Accelerators{}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node("x1", "xpu-pool", 0, true)
			n.Status.Allocatable = corev1.ResourceList{xpu: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64")}
			p := pod("job", "x1", "0")
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{xpu: resource.MustParse("3")}

			by := CacheByObject(map[client.Object]cache.ByObject{&corev1.Node{}: {Transform: base}}, tc.accel)
			require.Len(t, by, 1)
			var trimmed any
			for _, o := range by {
				var err error
				trimmed, err = o.Transform(n)
				require.NoError(t, err)
			}
			cached := []any{podindex.Compact(p, &tc.accel), trimmed}

			r, _, _ := newReconciler(t)
			r.Accelerators = tc.accel
			r.Pods, r.Nodes = sliceStore{cached[0]}, sliceStore{cached[1]}
			inv, err := r.inventory(context.Background(), nil)
			require.NoError(t, err)
			pool := inv.Pools["xpu-pool"]
			require.NotNil(t, pool)
			assert.Equal(t, []int64{tc.total, tc.used}, []int64{pool.Total, pool.Used})
		})
	}
}
