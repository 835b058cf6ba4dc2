package policy

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Known accelerator resource names. nvidia.com/mig-<profile> resources are matched by prefix.
var AcceleratorResources = []corev1.ResourceName{
	"nvidia.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend310",
	"huawei.com/Ascend310P", "amd.com/gpu",
}

const migPrefix = "nvidia.com/mig-"

// ExtraAcceleratorResources extends AcceleratorResources (set from a flag).
var ExtraAcceleratorResources []corev1.ResourceName

// IsAccelerator says whether a resource name counts as an accelerator.
func IsAccelerator(name corev1.ResourceName) bool {
	if strings.HasPrefix(string(name), migPrefix) {
		return true
	}
	for _, r := range AcceleratorResources {
		if r == name {
			return true
		}
	}
	for _, r := range ExtraAcceleratorResources {
		if r == name {
			return true
		}
	}
	return false
}

// IsNPUResource says whether a resource name is an Ascend NPU.
func IsNPUResource(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), "huawei.com/Ascend")
}

// NodeAccelerators returns the accelerator resources a node offers (allocatable), summed
// into one count, and the resource name with the most devices. A node with MIG
// resources and nvidia.com/gpu: 0 still counts its MIG devices.
func NodeAccelerators(node *corev1.Node) (corev1.ResourceName, int64) {
	var name corev1.ResourceName
	var total, best int64
	for rn, q := range node.Status.Allocatable {
		if !IsAccelerator(rn) {
			continue
		}
		v := q.Value()
		total += v
		if v > best || (v == best && rn < name) {
			name, best = rn, v
		}
	}
	return name, total
}

// PodAccelerators returns the accelerator devices a pod requests, counted as kubectl
// and the scheduler count requests: the larger of the app containers' sum (plus sidecar
// init containers) and any one init container (plus the sidecars started before it),
// plus pod overhead. A container that sets only a limit requests its limit, as the API
// server defaults it for extended resources.
func PodAccelerators(pod *corev1.Pod) int64 {
	var sum, sidecars, initPeak int64
	for i := range pod.Spec.Containers {
		sum += containerAccelerators(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		n := containerAccelerators(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += n
			initPeak = max(initPeak, sidecars)
			continue
		}
		initPeak = max(initPeak, sidecars+n)
	}
	total := max(sum+sidecars, initPeak)
	for rn, q := range pod.Spec.Overhead {
		if IsAccelerator(rn) {
			total += q.Value()
		}
	}
	return total
}

// containerAccelerators is the accelerators one container requests (its limit when it
// sets no request).
func containerAccelerators(c *corev1.Container) int64 {
	var n int64
	for rn, q := range c.Resources.Requests {
		if IsAccelerator(rn) {
			n += q.Value()
		}
	}
	for rn, q := range c.Resources.Limits {
		if _, requested := c.Resources.Requests[rn]; !requested && IsAccelerator(rn) {
			n += q.Value()
		}
	}
	return n
}

// PodAcceleratorResources lists every accelerator resource a pod's containers (init
// containers included) request or limit, sorted, each once.
func PodAcceleratorResources(pod *corev1.Pod) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			for _, rl := range []corev1.ResourceList{cs[i].Resources.Limits, cs[i].Resources.Requests} {
				for rn := range rl {
					if IsAccelerator(rn) {
						seen[rn] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Driver-version labels real clusters carry, in the order they are trusted.
var DriverVersionLabels = []string{
	"huawei.com/driver.version",           // Ascend device plugin
	"nvidia.com/cuda.driver-version.full", // NVIDIA GPU feature discovery
	LabelDriverVersion,                    // set by litepool or the operator
}

// DriverVersion reads a node's accelerator driver version from its labels.
func DriverVersion(node *corev1.Node) string {
	for _, k := range DriverVersionLabels {
		if v := node.Labels[k]; v != "" {
			return v
		}
	}
	return ""
}

// GPUType is a node's accelerator model: runwhere.ai/gpu-type, else what the device
// plugins say (nvidia.com/gpu.product, node.kubernetes.io/npu.chip.name).
func GPUType(node *corev1.Node) string {
	for _, k := range []string{LabelGPUType, "nvidia.com/gpu.product", "node.kubernetes.io/npu.chip.name"} {
		if v := node.Labels[k]; v != "" {
			return v
		}
	}
	return ""
}
