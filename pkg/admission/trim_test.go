package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// The node cache keeps what the rules read: every label (P6 matches node affinity against
// any of them), litepool's annotations and no others, the taints, the cordon, Ready and the
// extended resources' allocatable.
func TestTrimNodeKeepsWhatTheRulesRead(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1",
			Labels: map[string]string{policy.LabelPool: "p", "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true"},
			Annotations: map[string]string{policy.AnnotationUpgradeState: "done", policy.CordonUpgrade.Annotation(): "true",
				"nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.AVX512F,cpu-cpuid.AMXTILE", "node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{policy.ExclusiveTaint("p")}, PodCIDR: "10.0.0.0/24", Unschedulable: true},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"cpu": resource.MustParse("64"), "nvidia.com/gpu": resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
			Images: []corev1.ContainerImage{{Names: []string{"big"}}}},
	}
	out, err := trimNode(node.DeepCopy())
	require.NoError(t, err)
	got := out.(*corev1.Node)
	assert.Equal(t, node.Labels, got.Labels)
	assert.Equal(t, map[string]string{policy.AnnotationUpgradeState: "done", policy.CordonUpgrade.Annotation(): "true"}, got.Annotations)
	assert.Equal(t, node.Spec.Taints, got.Spec.Taints)
	assert.True(t, policy.IsNodeReady(got))
	assert.True(t, got.Spec.Unschedulable, "N3's domain floor counts members in service")
	assert.Equal(t, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, got.Status.Allocatable, "N2 compares a domain's accelerator counts; cpu is read by no rule")
	assert.Len(t, got.Status.Conditions, 1)
	assert.Empty(t, got.ManagedFields)
	assert.Empty(t, got.Status.Images)
	assert.Len(t, node.Annotations, 4, "the informer's object is not changed")
}
