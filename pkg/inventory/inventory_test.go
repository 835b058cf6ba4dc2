package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

func gpuNode(name, pool string, gpus int64, ready bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if pool != "" {
		n.Labels[policy.LabelPool] = pool
	}
	if gpus > 0 {
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

func gpuPod(name, node string, phase corev1.PodPhase, gpus string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ai"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestBuildSumsPoolsLikeKubectl(t *testing.T) {
	b := NewBuilder()
	b.AddPod(gpuPod("running", "n1", corev1.PodRunning, "4"))
	b.AddPod(gpuPod("pending-bound", "n1", corev1.PodPending, "2"))
	b.AddPod(gpuPod("done", "n1", corev1.PodSucceeded, "8"))
	b.AddPod(gpuPod("unbound", "", corev1.PodPending, "8"))
	initPod := gpuPod("with-init", "n2", corev1.PodRunning, "1")
	initPod.Spec.InitContainers = []corev1.Container{{Name: "i",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("3")}}}}
	b.AddPod(initPod) // max(1, 3) = 3, as kubectl counts
	ds := gpuPod("daemon", "n2", corev1.PodRunning, "0")
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "dp", Controller: ptr.To(true)}}
	b.AddPod(ds)

	b.AddNode(gpuNode("n2", "train", 8, true))
	b.AddNode(gpuNode("n1", "train", 8, true))
	b.AddNode(gpuNode("n3", "train", 8, false)) // NotReady: in the total, not in free
	b.AddNode(gpuNode("cpu", "", 0, true))
	inv := b.Build("empty-pool")

	assert.Equal(t, []string{"empty-pool", "train", "default"}, inv.PoolNames())
	train := inv.Pools["train"]
	assert.Equal(t, []int64{24, 9, 7}, []int64{train.Total, train.Used, train.Free})
	assert.Equal(t, policy.PoolDegraded, train.Phase)
	assert.Equal(t, []int{2, 1}, []int{train.Healthy, train.Faulty})
	assert.Equal(t, corev1.ResourceName("nvidia.com/gpu"), train.Resource)
	assert.Equal(t, policy.PoolEmpty, inv.Pools["empty-pool"].Phase)
	assert.Equal(t, policy.PoolRunning, inv.Pools["default"].Phase)
	assert.Equal(t, []string{"cpu", "n1", "n2", "n3"}, []string{inv.Nodes[0].Name, inv.Nodes[1].Name, inv.Nodes[2].Name, inv.Nodes[3].Name})
	assert.Equal(t, 2, inv.Nodes[1].WorkloadPods, "n1: running and pending count, the finished pod does not")
	assert.Equal(t, 1, inv.Nodes[2].WorkloadPods, "n2: the DaemonSet pod is not a workload")
}

func TestUsedNeverMakesFreeNegative(t *testing.T) {
	b := NewBuilder()
	b.AddPod(gpuPod("over", "n1", corev1.PodRunning, "10"))
	b.AddNode(gpuNode("n1", "train", 8, true))
	inv := b.Build()
	assert.Equal(t, int64(0), inv.Pools["train"].Free)
	assert.Equal(t, int64(0), inv.Nodes[0].Free())
}
