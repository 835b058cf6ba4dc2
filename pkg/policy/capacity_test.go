package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func capacityNode(name, pool string, gpus int64, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelPool: pool}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI),
				corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func TestPoolCapacity(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}}
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	quarantined := func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, QuarantineTaint("DeviceUnhealthy")) }
	upgrading := func(n *corev1.Node) {
		n.Annotations = map[string]string{AnnotationUpgradeState: string(UpgradeDrain)}
	}
	exclusive := func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ExclusiveTaint("train")) }
	accel := NewAccelerators()

	t.Run("every healthy member counts", func(t *testing.T) {
		c := PoolCapacity(pool, []*corev1.Node{capacityNode("a", "train", 8), capacityNode("b", "train", 8, exclusive), capacityNode("c", "train", 8)}, accel)
		assert.Equal(t, corev1.ResourceName("nvidia.com/gpu"), c.Resource)
		assert.EqualValues(t, 24, c.Accelerators)
		assert.Equal(t, []string{"a", "b", "c"}, c.Nodes)
		assert.Empty(t, c.Out)
		assert.Equal(t, "192", c.CPU.String())
		assert.Equal(t, "1536Gi", c.Memory.String())
	})
	t.Run("members held out leave the capacity, each with its reason", func(t *testing.T) {
		c := PoolCapacity(pool, []*corev1.Node{capacityNode("a", "train", 8), capacityNode("b", "train", 8, notReady),
			capacityNode("c", "train", 8, cordoned), capacityNode("d", "train", 8, quarantined),
			capacityNode("e", "train", 8, upgrading, cordoned)}, accel)
		assert.EqualValues(t, 8, c.Accelerators)
		assert.Equal(t, []string{"a"}, c.Nodes)
		assert.Equal(t, map[string]string{"b": OutNotReady, "c": OutCordoned, "d": OutQuarantined, "e": OutUpgrading}, c.Out)
		assert.Equal(t, "64", c.CPU.String())
	})
	t.Run("a taint the pool's pods do not tolerate leaves the capacity", func(t *testing.T) {
		taint := func(key, value string, effect corev1.TaintEffect) func(*corev1.Node) {
			return func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
			}
		}
		c := PoolCapacity(pool, []*corev1.Node{
			capacityNode("own", "train", 8, exclusive),
			capacityNode("gke", "train", 8, taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)),
			capacityNode("prefer", "train", 8, taint("maintenance", "soon", corev1.TaintEffectPreferNoSchedule)),
			capacityNode("noschedule", "train", 8, taint("maintenance", "", corev1.TaintEffectNoSchedule)),
			capacityNode("noexecute", "train", 8, taint("example.com/evict", "", corev1.TaintEffectNoExecute)),
			capacityNode("gpu-noexecute", "train", 8, taint("nvidia.com/gpu", "", corev1.TaintEffectNoExecute)),
			capacityNode("other-pool", "train", 8, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{ExclusiveTaint("infer")} }),
			capacityNode("quarantined-too", "train", 8, quarantined, taint("maintenance", "", corev1.TaintEffectNoSchedule)),
		}, accel)
		assert.Equal(t, []string{"gke", "own", "prefer"}, c.Nodes, "own taint, nvidia.com/gpu NoSchedule (ExtendedResourceToleration) and PreferNoSchedule are tolerated")
		assert.EqualValues(t, 24, c.Accelerators)
		assert.Equal(t, map[string]string{"noschedule": OutTainted, "noexecute": OutTainted,
			"gpu-noexecute": OutTainted, "other-pool": OutTainted, "quarantined-too": OutQuarantined}, c.Out,
			"ExtendedResourceToleration tolerates NoSchedule only; another pool's taint is not the pool's own")
	})
	t.Run("a taint keyed by the pool's own accelerator is tolerated (ExtendedResourceToleration)", func(t *testing.T) {
		p := pool.DeepCopy()
		p.Spec.Accelerator.ResourceName = "huawei.com/Ascend910"
		npu := capacityNode("npu", "train", 0, func(n *corev1.Node) {
			n.Status.Allocatable["huawei.com/Ascend910"] = resource.MustParse("16")
			n.Spec.Taints = []corev1.Taint{{Key: "huawei.com/Ascend910", Effect: corev1.TaintEffectNoSchedule}}
		})
		c := PoolCapacity(p, []*corev1.Node{npu}, accel)
		assert.EqualValues(t, 16, c.Accelerators)
		assert.Empty(t, c.Out)
	})
	t.Run("allocatable counts, not capacity", func(t *testing.T) {
		n := capacityNode("a", "train", 7, func(n *corev1.Node) {
			n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		})
		assert.EqualValues(t, 7, PoolCapacity(pool, []*corev1.Node{n}, accel).Accelerators)
	})
	t.Run("a node of another pool gives nothing, whoever passes it", func(t *testing.T) {
		c := PoolCapacity(pool, []*corev1.Node{capacityNode("a", "train", 8), capacityNode("x", "infer", 8), capacityNode("y", "", 8)}, accel)
		assert.EqualValues(t, 8, c.Accelerators)
		assert.Equal(t, []string{"a"}, c.Nodes)
	})
	t.Run("a GPU lost to the device plugin leaves the capacity", func(t *testing.T) {
		c := PoolCapacity(pool, []*corev1.Node{capacityNode("a", "train", 8), capacityNode("b", "train", 7)}, accel)
		assert.EqualValues(t, 15, c.Accelerators)
	})
	t.Run("headroom lowers it, never below zero", func(t *testing.T) {
		p := pool.DeepCopy()
		p.Spec.Queue = &v1alpha1.QueueSpec{Headroom: 4}
		assert.EqualValues(t, 12, PoolCapacity(p, []*corev1.Node{capacityNode("a", "train", 8), capacityNode("b", "train", 8)}, accel).Accelerators)
		p.Spec.Queue.Headroom = 100
		assert.EqualValues(t, 0, PoolCapacity(p, []*corev1.Node{capacityNode("a", "train", 8)}, accel).Accelerators)
	})
	t.Run("the pool's resource name wins over what members offer", func(t *testing.T) {
		p := pool.DeepCopy()
		p.Spec.Accelerator.ResourceName = "huawei.com/Ascend910"
		c := PoolCapacity(p, []*corev1.Node{capacityNode("a", "train", 8)}, accel)
		assert.Equal(t, corev1.ResourceName("huawei.com/Ascend910"), c.Resource)
		assert.EqualValues(t, 0, c.Accelerators)
	})
	t.Run("an empty pool has nothing", func(t *testing.T) {
		c := PoolCapacity(pool, nil, accel)
		assert.EqualValues(t, 0, c.Accelerators)
		assert.Empty(t, c.Resource)
	})
}

// TestWithDevices: a pool's DRA device quota is the devices of its schedulable members
// (the same NodeOut rules as its GPUs), less headroom; a slice's count for a node of
// another pool, or a member held out, adds nothing.
func TestWithDevices(t *testing.T) {
	dra := &v1alpha1.QueueDevices{Resource: "example.com/gpu", DeviceClassNames: []string{"gpu.example.com"}}
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: v1alpha1.PoolSpec{Queue: &v1alpha1.QueueSpec{Devices: dra}}}
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	quarantined := func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, QuarantineTaint("DeviceUnhealthy")) }
	nodes := []*corev1.Node{capacityNode("a", "train", 0), capacityNode("b", "train", 0), capacityNode("c", "train", 0),
		capacityNode("x", "infer", 0)}
	devices := map[string]int64{"a": 8, "b": 8, "c": 8, "x": 8, "ghost": 8}
	accel := NewAccelerators()

	c := WithDevices(pool, PoolCapacity(pool, nodes, accel), devices)
	assert.Equal(t, corev1.ResourceName("example.com/gpu"), c.DeviceResource)
	assert.EqualValues(t, 24, c.Devices, "3 members of 8; the other pool's node and a node in no pool add nothing")

	nodes[0] = capacityNode("a", "train", 0, cordoned)
	assert.EqualValues(t, 16, WithDevices(pool, PoolCapacity(pool, nodes, accel), devices).Devices, "a cordoned member")
	nodes[1] = capacityNode("b", "train", 0, quarantined)
	assert.EqualValues(t, 8, WithDevices(pool, PoolCapacity(pool, nodes, accel), devices).Devices, "and a quarantined one")

	pool.Spec.Queue.Headroom = 10
	assert.EqualValues(t, 0, WithDevices(pool, PoolCapacity(pool, nodes, accel), devices).Devices, "headroom, never below 0")
	pool.Spec.Queue.Headroom = 2
	nodes[0], nodes[1] = capacityNode("a", "train", 0), capacityNode("b", "train", 0)
	assert.EqualValues(t, 22, WithDevices(pool, PoolCapacity(pool, nodes, accel), devices).Devices, "headroom")

	pool.Spec.Queue.Devices = nil
	c = WithDevices(pool, PoolCapacity(pool, nodes, accel), devices)
	assert.Empty(t, c.DeviceResource, "no spec.queue.devices: no device quota")
	assert.Zero(t, c.Devices)
}
