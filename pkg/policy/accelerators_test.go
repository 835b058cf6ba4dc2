package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// Requests are counted per resource, as kubectl's resource helper does: an init
// container's peak of one resource never hides the app's use of another.
func TestPodAcceleratorRequestsPerResource(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "load", Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "4")}},
			{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/mig-1g.10gb", "1")}},
			{Name: "after-sidecar", Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/mig-1g.10gb", "2")}},
		},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "1", "nvidia.com/mig-1g.10gb", "1")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "2", "cpu", "4")}},
		},
		Overhead: rl("nvidia.com/gpu", "0"),
	}}
	// gpu: max(1+2, 4) = 4; mig: max(1 app + 1 sidecar, 1 sidecar + 2 init) = 3.
	assert.Equal(t, map[corev1.ResourceName]int64{"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 3}, Accelerators{}.PodAcceleratorRequests(pod))
	assert.Equal(t, int64(4), Accelerators{}.PodAccelerators(pod), "MIG slices are not GPUs")
	assert.Nil(t, Accelerators{}.PodAcceleratorRequests(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cpu"}}}}))
}

func TestNodeAcceleratorsLeaveMIGApart(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: rl("nvidia.com/gpu", "0", "nvidia.com/mig-1g.10gb", "7", "cpu", "64")}}
	rn, n := Accelerators{}.NodeAccelerators(node)
	assert.Equal(t, corev1.ResourceName("nvidia.com/gpu"), rn)
	assert.Equal(t, int64(0), n)
	assert.Equal(t, map[corev1.ResourceName]int64{"nvidia.com/mig-1g.10gb": 7}, NodeMIG(node))
}

func TestAcceleratorsDefaultSet(t *testing.T) {
	var known Accelerators
	for _, rn := range []corev1.ResourceName{"nvidia.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend310", "huawei.com/Ascend310P", "amd.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"} {
		assert.True(t, known.Is(rn), rn)
	}
	for _, rn := range []corev1.ResourceName{"cpu", "memory", "vendor.example/xpu", "nvidia.com/gpu.shared", "huawei.com/Ascend", "nvidia.com/mig"} {
		assert.False(t, known.Is(rn), rn)
	}
	assert.True(t, known.IsWhole("nvidia.com/gpu"))
	assert.False(t, known.IsWhole("nvidia.com/mig-1g.10gb"), "a MIG slice is an accelerator but not a whole device")
	assert.Equal(t, "", known.String())
}

func TestAcceleratorsExtraResource(t *testing.T) {
	xpu := NewAccelerators("vendor.example/xpu")
	assert.True(t, xpu.Is("vendor.example/xpu"))
	assert.True(t, xpu.IsWhole("vendor.example/xpu"))
	assert.True(t, xpu.Is("nvidia.com/gpu"), "the known set stays")
	assert.True(t, xpu.Is("nvidia.com/mig-2g.20gb"), "MIG slices stay, by prefix")
	assert.False(t, xpu.Is("vendor.example/other"))
	assert.False(t, Accelerators{}.Is("vendor.example/xpu"), "another set is not changed")

	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Limits: rl("vendor.example/xpu", "2", "nvidia.com/gpu", "1")}},
	}}}
	assert.Equal(t, int64(3), xpu.PodAccelerators(pod))
	assert.Equal(t, int64(1), Accelerators{}.PodAccelerators(pod))
	assert.Equal(t, []corev1.ResourceName{"nvidia.com/gpu", "vendor.example/xpu"}, xpu.PodAcceleratorResources(pod))
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: rl("vendor.example/xpu", "8", "cpu", "64")}}
	rn, n := xpu.NodeAccelerators(node)
	assert.Equal(t, corev1.ResourceName("vendor.example/xpu"), rn)
	assert.Equal(t, int64(8), n)
	rn, n = Accelerators{}.NodeAccelerators(node)
	assert.Equal(t, corev1.ResourceName(""), rn)
	assert.Equal(t, int64(0), n)

	extra := []corev1.ResourceName{"vendor.example/xpu"}
	held := NewAccelerators(extra...)
	extra[0] = "vendor.example/changed"
	assert.True(t, held.Is("vendor.example/xpu"), "a set keeps its own copy of the names it was made with")
}

func TestParseAccelerators(t *testing.T) {
	a, err := ParseAccelerators(" vendor.example/xpu, ,acme.io/npu-v2,")
	assert.NoError(t, err)
	assert.Equal(t, "vendor.example/xpu,acme.io/npu-v2", a.String())
	assert.True(t, a.Is("acme.io/npu-v2"))
	assert.True(t, a.Is("nvidia.com/gpu"))

	a, err = ParseAccelerators("")
	assert.NoError(t, err)
	assert.Equal(t, Accelerators{}, a, "an empty flag is the known set")

	for value, want := range map[string]string{
		"vendor.example/xpu,xpu":      `--accelerator-resources: "xpu" is not an extended resource name (such as vendor.example/xpu): it has no vendor domain prefix`,
		"Vendor_Example/xpu":          `--accelerator-resources: "Vendor_Example/xpu" is not an extended resource name (such as vendor.example/xpu): prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		"vendor.example/x pu":         `--accelerator-resources: "vendor.example/x pu" is not an extended resource name (such as vendor.example/xpu): name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		"kubernetes.io/xpu":           `--accelerator-resources: "kubernetes.io/xpu" is not an extended resource name (such as vendor.example/xpu): the kubernetes.io domain is reserved for native resources`,
		"node.kubernetes.io/xpu":      `--accelerator-resources: "node.kubernetes.io/xpu" is not an extended resource name (such as vendor.example/xpu): the kubernetes.io domain is reserved for native resources`,
		"requests.vendor.example/xpu": `--accelerator-resources: "requests.vendor.example/xpu" is not an extended resource name (such as vendor.example/xpu): the requests. prefix names a quota, not a resource`,
	} {
		a, err := ParseAccelerators(value)
		assert.EqualError(t, err, want, value)
		assert.Equal(t, Accelerators{}, a, value)
	}
}

// The inventory runs these over every pod of the cluster: they must not allocate, with
// or without extra resources.
func TestAcceleratorsAllocateNothing(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Limits: rl("vendor.example/xpu", "2", "nvidia.com/gpu", "1", "cpu", "1")}},
	}}}
	xpu := NewAccelerators("vendor.example/xpu")
	var n int64
	count := func() {
		n = 0
		xpu.eachContainerAccelerator(&pod.Spec.Containers[0], func(_ corev1.ResourceName, v int64) { n += v })
	}
	assert.Zero(t, testing.AllocsPerRun(100, count))
	assert.Equal(t, int64(3), n, "both accelerators are counted, cpu is not")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = xpu.Is("cpu") }))
}
