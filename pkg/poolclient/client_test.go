package poolclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func TestToUnstructuredSendsOnlyWhatIsSet(t *testing.T) {
	p := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"},
		Spec: v1alpha1.PoolSpec{Description: "d", MinNodes: 2, NamespaceSelector: &metav1.LabelSelector{}}}
	p.Status.NodeCount = 3
	u, err := ToUnstructured(p)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"apiVersion": "runwhere.ai/v1alpha1",
		"kind":       "Pool",
		"metadata":   map[string]any{"name": "train-a100"},
		"spec":       map[string]any{"description": "d", "minNodes": int64(2), "namespaceSelector": map[string]any{}},
	}, u.Object)
	back, err := FromUnstructured(u)
	require.NoError(t, err)
	assert.Equal(t, p.Spec, back.Spec)
}
