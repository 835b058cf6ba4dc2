package podindex_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// The index keeps what the catalog reads of a pod, and the catalog's verdicts on the
// rebuilt pod are those on the full one.
func TestPodIndexKeepsWhatTheRulesRead(t *testing.T) {
	idx, err := podindex.NewUnstarted(nil)
	require.NoError(t, err)
	now := metav1.Now()
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "ai", Labels: map[string]string{policy.LabelPool: "p1", "app": "x"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "j", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "i"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ds-0", Namespace: "kube-x",
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "j"}, {Kind: "DaemonSet", Name: "d", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "static", Namespace: "kube-x", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "h", "other": "y"}},
			Spec: corev1.PodSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "leaving", Namespace: "ai", DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "ai", Labels: map[string]string{policy.LabelPool: "p1"}}},
	}
	for _, p := range pods {
		require.NoError(t, idx.Add(podindex.Compact(p.DeepCopy(), nil)))
	}
	r := idx.Reader(nil)
	var onNode corev1.PodList
	require.NoError(t, r.List(context.Background(), &onNode, client.MatchingFields{podindex.ByNode: "n1"}))
	assert.Len(t, onNode.Items, 4)
	for i := range onNode.Items {
		got := &onNode.Items[i]
		for _, p := range pods {
			if p.Name == got.Name {
				assert.Equal(t, inventory.IsWorkloadPod(p), inventory.IsWorkloadPod(got), got.Name)
				assert.Equal(t, p.DeletionTimestamp, got.DeletionTimestamp, got.Name)
				assert.Equal(t, p.Spec.NodeName, got.Spec.NodeName)
			}
		}
		assert.Empty(t, got.Spec.Containers, "containers are not kept")
	}
	var inPool corev1.PodList
	require.NoError(t, r.List(context.Background(), &inPool, client.MatchingFields{podindex.ByPool: "p1"}))
	assert.ElementsMatch(t, []string{"train-0", "pending"}, []string{inPool.Items[0].Name, inPool.Items[1].Name})
	assert.Equal(t, map[string]string{policy.LabelPool: "p1"}, inPool.Items[0].Labels, "only the pool label is kept")

	var all corev1.PodList
	assert.ErrorContains(t, r.List(context.Background(), &all), "lists pods only by", "a read the index cannot answer fails instead of answering empty")
}

// An index built with accelerators keeps each pod's requests, and the inventory's figures
// from its entries are those from the whole pods: the controller's Pool status reads
// nothing else of a pod.
func TestIndexedPodsCountAsWholePods(t *testing.T) {
	accel := policy.Accelerators{}
	one := resource.MustParse("1")
	two := resource.MustParse("2")
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ai"}, Spec: corev1.PodSpec{NodeName: "n1",
			InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": two}}}},
			Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": one}}},
				{Name: "mig", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/mig-1g.10gb": one, corev1.ResourceCPU: two}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "kube-x", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "d", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": one}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: "ai"}, Spec: corev1.PodSpec{NodeName: "n2", Containers: []corev1.Container{{Name: "c"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "ai"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": one}}}}}},
	}
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "p"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "nvidia.com/mig-1g.10gb": two}}}
	}
	whole, indexed := inventory.NewBuilder(), inventory.NewBuilder()
	for _, p := range pods {
		whole.AddPod(p)
		indexed.AddIndexedPod(podindex.Compact(p.DeepCopy(), &accel))
	}
	for _, n := range []string{"n1", "n2"} {
		whole.AddNode(node(n))
		indexed.AddNode(node(n))
	}
	want, got := whole.Build(), indexed.Build()
	require.Equal(t, want, got)
	require.Equal(t, int64(3), got.Pools["p"].Used, "the init container's 2 GPUs and the DaemonSet pod's 1 (the MIG slice is not a GPU)")
	assert.Nil(t, podindex.Compact(pods[0], nil).Requests, "the webhook's index keeps no requests")
}
