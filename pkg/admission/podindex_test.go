package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// The index keeps what the catalog reads of a pod, and the catalog's verdicts on the
// rebuilt pod are those on the full one.
func TestPodIndexKeepsWhatTheRulesRead(t *testing.T) {
	idx, err := newPodIndex(nil)
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
		e, err := compactPod(p.DeepCopy())
		require.NoError(t, err)
		require.NoError(t, idx.informer.GetIndexer().Add(e))
	}
	r := idx.Reader(nil)
	var onNode corev1.PodList
	require.NoError(t, r.List(context.Background(), &onNode, client.MatchingFields{IndexPodNode: "n1"}))
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
	require.NoError(t, r.List(context.Background(), &inPool, client.MatchingFields{IndexPodPool: "p1"}))
	assert.ElementsMatch(t, []string{"train-0", "pending"}, []string{inPool.Items[0].Name, inPool.Items[1].Name})
	assert.Equal(t, map[string]string{policy.LabelPool: "p1"}, inPool.Items[0].Labels, "only the pool label is kept")

	var all corev1.PodList
	assert.ErrorContains(t, r.List(context.Background(), &all), "lists pods only by", "a read the index cannot answer fails instead of answering empty")
}
