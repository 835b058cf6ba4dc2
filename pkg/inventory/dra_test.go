package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const gpuDriver = "gpu.example.com"

func draClassOf(name, expr, extended string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if expr != "" {
		c.Spec.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
	}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return c
}

func gpuDevice(name, typ, product string) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type":        {StringValue: ptr.To(typ)},
		"productName": {StringValue: ptr.To(product)},
	}}
}

func consumes(d resourcev1.Device, set string, memGi int64) resourcev1.Device {
	d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: set, Counters: map[string]resourcev1.Counter{
		"memory": {Value: *resource.NewQuantity(memGi<<30, resource.BinarySI)},
	}}}
	return d
}

func sliceOf(node string, gen int64, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + gpuDriver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: gpuDriver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1},
			Devices: devices,
		},
	}
}

func claimOf(name, pool string, devices ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}}
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}}}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuDriver, Pool: pool, Device: d})
	}
	return c
}

func classes() []*resourcev1.DeviceClass {
	return []*resourcev1.DeviceClass{
		draClassOf("gpu", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "gpu"`, "nvidia.com/gpu"),
		draClassOf("mig", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "mig"`, ""),
	}
}

func TestDRACounting(t *testing.T) {
	whole := func(name string) resourcev1.Device { return gpuDevice(name, "gpu", "A100-SXM4-40GB") }
	// One physical GPU published whole and as two 3g partitions, over one counter set.
	partitioned := []resourcev1.Device{
		consumes(gpuDevice("gpu-1", "gpu", "A100-SXM4-40GB"), "gpu-1-counters", 40),
		consumes(gpuDevice("gpu-1-mig-0", "mig", "A100-SXM4-40GB"), "gpu-1-counters", 20),
		consumes(gpuDevice("gpu-1-mig-1", "mig", "A100-SXM4-40GB"), "gpu-1-counters", 20),
	}
	tainted := whole("gpu-2")
	tainted.Taints = []resourcev1.DeviceTaint{{Key: "gpu.example.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	onlyNoted := whole("gpu-3")
	onlyNoted.Taints = []resourcev1.DeviceTaint{{Key: "gpu.example.com/note", Effect: resourcev1.DeviceTaintEffectNone}}

	row := func(total, alloc, unhealthy, free, partitionable, partsAlloc int64) DRADevices {
		return DRADevices{Driver: gpuDriver, Class: "gpu", Model: "A100-SXM4-40GB", Total: total, Allocated: alloc,
			Unhealthy: unhealthy, Free: free, Partitionable: partitionable, PartitionsAllocated: partsAlloc}
	}
	tests := []struct {
		name   string
		slices []*resourcev1.ResourceSlice
		claims []*resourcev1.ResourceClaim
		want   []DRADevices
		served map[corev1.ResourceName]int64
	}{
		{
			name:   "whole GPUs, one allocated",
			slices: []*resourcev1.ResourceSlice{sliceOf("n1", 1, whole("gpu-0"), whole("gpu-1"))},
			claims: []*resourcev1.ResourceClaim{claimOf("c1", "n1", "gpu-0")},
			want:   []DRADevices{row(2, 1, 0, 1, 0, 0)},
		},
		{
			name:   "a partitioned GPU counts once, under the whole device's class",
			slices: []*resourcev1.ResourceSlice{sliceOf("n1", 1, partitioned...)},
			want:   []DRADevices{row(1, 0, 0, 1, 1, 0)},
		},
		{
			name:   "an allocated partition makes its GPU allocated, not free",
			slices: []*resourcev1.ResourceSlice{sliceOf("n1", 1, partitioned...)},
			claims: []*resourcev1.ResourceClaim{claimOf("c1", "n1", "gpu-1-mig-0"), claimOf("c2", "n1", "gpu-1-mig-1")},
			want:   []DRADevices{row(1, 1, 0, 0, 1, 2)},
		},
		{
			name:   "a NoExecute taint is unhealthy, a None taint is not",
			slices: []*resourcev1.ResourceSlice{sliceOf("n1", 1, tainted, onlyNoted)},
			want:   []DRADevices{row(2, 0, 1, 1, 0, 0)},
		},
		{
			name:   "only the newest generation of a pool counts",
			slices: []*resourcev1.ResourceSlice{sliceOf("n1", 2, whole("gpu-0")), sliceOf("n1", 1, whole("gpu-0"), whole("gpu-1"), whole("gpu-2"))},
			want:   []DRADevices{row(1, 0, 0, 1, 0, 0)},
		},
		{
			name:   "a claim the scheduler made for nvidia.com/gpu serves that resource",
			slices: []*resourcev1.ResourceSlice{sliceOf("n1", 1, whole("gpu-0"), whole("gpu-1"))},
			claims: []*resourcev1.ResourceClaim{func() *resourcev1.ResourceClaim {
				c := claimOf("pod-extended-resources-x", "n1", "gpu-0", "gpu-1")
				c.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
				return c
			}()},
			want:   []DRADevices{row(2, 2, 0, 0, 0, 0)},
			served: map[corev1.ResourceName]int64{"nvidia.com/gpu": 2},
		},
		{
			name:   "an unallocated claim adds nothing",
			slices: []*resourcev1.ResourceSlice{sliceOf("n1", 1, whole("gpu-0"))},
			claims: []*resourcev1.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "pending"}}},
			want:   []DRADevices{row(1, 0, 0, 1, 0, 0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewDRACounter()
			for _, dc := range classes() {
				c.AddClass(dc)
			}
			for _, cl := range tt.claims {
				c.AddClaim(cl)
			}
			for _, s := range tt.slices {
				c.AddSlice(s)
			}
			nodes := c.Finish()
			require.Contains(t, nodes, "n1")
			assert.Equal(t, tt.want, nodes["n1"].Devices)
			assert.Equal(t, tt.served, nodes["n1"].Served)
		})
	}
}

func TestDRAClassAndModel(t *testing.T) {
	c := NewDRACounter()
	for _, dc := range append(classes(), draClassOf("any-gpu-driver", `device.driver == "gpu.example.com"`, ""), draClassOf("broken", `device.attributes["gpu.example.com"].type ==`, "")) {
		c.AddClass(dc)
	}
	other := resourcev1.Device{Name: "nic-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"vendor.example.com/model": {StringValue: ptr.To("X")},
	}}
	noNode := sliceOf("n2", 1, gpuDevice("remote", "gpu", "H100"))
	noNode.Spec.NodeName, noNode.Spec.AllNodes = nil, ptr.To(true)
	c.AddSlice(sliceOf("n1", 1, gpuDevice("gpu-0", "gpu", "H100"), gpuDevice("odd", "tpu", "T1"), other))
	c.AddSlice(noNode)
	nodes := c.Finish()
	assert.Equal(t, []DRADevices{
		// a model attribute of another domain is not this driver's model
		{Driver: gpuDriver, Class: "any-gpu-driver", Model: "", Total: 1, Free: 1},
		// the catch-all class, when no narrower one selects the device
		{Driver: gpuDriver, Class: "any-gpu-driver", Model: "T1", Total: 1, Free: 1},
		// the narrowest class wins over the catch-all
		{Driver: gpuDriver, Class: "gpu", Model: "H100", Total: 1, Free: 1},
	}, nodes["n1"].Devices)
	assert.NotContains(t, nodes, "n2", "devices not bound to one node belong to no node")
	assert.Equal(t, []corev1.ResourceName{"nvidia.com/gpu"}, c.ExtendedResources())
}

// TestDRAExtendedResourceCountedOnce: a pod asking for nvidia.com/gpu on a node whose GPUs
// are DRA devices is served by a claim; its request is not also extended-resource usage.
func TestDRAExtendedResourceCountedOnce(t *testing.T) {
	c := NewDRACounter()
	for _, dc := range classes() {
		c.AddClass(dc)
	}
	claim := claimOf("trainer-extended-resources-abc", "n1", "gpu-0")
	claim.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
	c.AddClaim(claim)
	c.AddSlice(sliceOf("n1", 1, gpuDevice("gpu-0", "gpu", "A100"), gpuDevice("gpu-1", "gpu", "A100")))

	b := NewBuilder()
	b.DRA = c.Finish()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "ml"}, Spec: corev1.PodSpec{
		NodeName: "n1",
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
		}}},
	}}
	b.AddPod(pod)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"runwhere.ai/pool": "train"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	b.AddNode(node)
	inv := b.Build()
	n := inv.Nodes[0]
	assert.Equal(t, int64(0), n.Total, "no device plugin offers nvidia.com/gpu")
	assert.Equal(t, int64(0), n.Used, "the request is served by a DRA device, counted there")
	assert.Equal(t, DRADevices{Total: 2, Allocated: 1, Free: 1}, DRASum(n.DRA))
	assert.Equal(t, DRADevices{Total: 2, Allocated: 1, Free: 1}, DRASum(inv.Pools["train"].DRA))
}

func TestCollectDRAFake(t *testing.T) {
	client := fake.NewClientset(classes()[0], sliceOf("n1", 1, gpuDevice("gpu-0", "gpu", "A100")), claimOf("c", "n1", "gpu-0"))
	nodes, warning, err := CollectDRA(t.Context(), client)
	require.NoError(t, err)
	assert.Empty(t, warning)
	assert.Equal(t, []DRADevices{{Driver: gpuDriver, Class: "gpu", Model: "A100", Total: 1, Allocated: 1}}, nodes["n1"].Devices)
}

func TestTaintedDevicesByNode(t *testing.T) {
	node := func(n string) *string { return &n }
	taint := func(e resourcev1.DeviceTaintEffect) []resourcev1.DeviceTaint {
		return []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Effect: e}}
	}
	slice := func(name string, gen int64, n *string, devs ...resourcev1.Device) resourcev1.ResourceSlice {
		return resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.nvidia.com", Pool: resourcev1.ResourcePool{Name: name, Generation: gen}, NodeName: n, Devices: devs}}
	}
	got := TaintedDevicesByNode([]resourcev1.ResourceSlice{
		slice("n1", 1, node("n1"), resourcev1.Device{Name: "gpu-1", Taints: taint(resourcev1.DeviceTaintEffectNoSchedule)},
			resourcev1.Device{Name: "gpu-0"}),
		// An older generation of n2's pool: its taint is history, not a fault.
		slice("n2", 1, node("n2"), resourcev1.Device{Name: "gpu-0", Taints: taint(resourcev1.DeviceTaintEffectNoExecute)}),
		slice("n2", 2, node("n2"), resourcev1.Device{Name: "gpu-0"}),
		// A taint that only prefers other devices leaves the device in service.
		slice("n3", 1, node("n3"), resourcev1.Device{Name: "gpu-0", Taints: taint(resourcev1.DeviceTaintEffect("None"))}),
		// Devices of several nodes in one slice carry their own node.
		slice("multi", 1, nil, resourcev1.Device{Name: "gpu-9", NodeName: node("n4"), Taints: taint(resourcev1.DeviceTaintEffectNoExecute)}),
	})
	assert.Equal(t, map[string][]string{
		"n1": {"gpu.nvidia.com/n1/gpu-1"},
		"n4": {"gpu.nvidia.com/multi/gpu-9"},
	}, got)
}

// TestDRAMatching: a queue's device quota counts, per node, the healthy physical
// devices any of its classes selects: once each, whichever classes select it;
// a tainted device, a device no class of the list selects and a partition are not
// counted apart from their device.
func TestDRAMatching(t *testing.T) {
	c := NewDRACounter()
	for _, dc := range append(classes(), draClassOf("any-gpu-driver", `device.driver == "gpu.example.com"`, "")) {
		c.AddClass(dc)
	}
	tainted := gpuDevice("gpu-2", "gpu", "H100")
	tainted.Taints = []resourcev1.DeviceTaint{{Key: "xid", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	c.AddSlice(sliceOf("n1", 1, gpuDevice("gpu-0", "gpu", "H100"), gpuDevice("gpu-1", "gpu", "H100"), tainted,
		gpuDevice("tpu-0", "tpu", "T1")))
	c.AddSlice(sliceOf("n2", 1, consumes(gpuDevice("gpu-0", "gpu", "H100"), "gpu-0", 80),
		consumes(gpuDevice("gpu-0-mig-0", "mig", "H100"), "gpu-0", 40), consumes(gpuDevice("gpu-0-mig-1", "mig", "H100"), "gpu-0", 40)))
	nodes := c.Finish()

	assert.Equal(t, map[string]int64{"n1": 2, "n2": 1}, nodes.Matching([]string{"gpu"}))
	assert.Equal(t, map[string]int64{"n1": 3, "n2": 1}, nodes.Matching([]string{"gpu", "any-gpu-driver"}),
		"a device both classes select counts once; the catch-all adds tpu-0")
	assert.Empty(t, nodes.Matching([]string{"mig"}), "a partitioned GPU counts as its whole device's classes")
	assert.Empty(t, nodes.Matching([]string{"no-such-class"}))
}
