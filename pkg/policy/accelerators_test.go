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
	assert.Equal(t, map[corev1.ResourceName]int64{"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 3}, PodAcceleratorRequests(pod))
	assert.Equal(t, int64(4), PodAccelerators(pod), "MIG slices are not GPUs")
	assert.Nil(t, PodAcceleratorRequests(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cpu"}}}}))
}

func TestNodeAcceleratorsLeaveMIGApart(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: rl("nvidia.com/gpu", "0", "nvidia.com/mig-1g.10gb", "7", "cpu", "64")}}
	rn, n := NodeAccelerators(node)
	assert.Equal(t, corev1.ResourceName("nvidia.com/gpu"), rn)
	assert.Equal(t, int64(0), n)
	assert.Equal(t, map[corev1.ResourceName]int64{"nvidia.com/mig-1g.10gb": 7}, NodeMIG(node))
}
