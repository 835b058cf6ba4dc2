package edit

import (
	"testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEditPoolFlags(t *testing.T) {
	old := &v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Description: "d", Tags: map[string]string{"a": "1", "b": "2"}, MinNodes: 1}}
	o := &EditPoolOptions{Tags: []string{"a-", "c=3"}, MinNodes: 2, Exclusive: true, Type: "Inference",
		set: map[string]bool{"tag": true, "min-nodes": true, "exclusive": true, "type": true}}
	p, err := o.applyFlags(old)
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.PoolSpec{Description: "d", Tags: map[string]string{"b": "2", "c": "3"}, MinNodes: 2, Exclusive: true, Type: "Inference"}, p.Spec)
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, old.Spec.Tags, "the original is not changed")
	assert.Equal(t, []string{"tags", "type", "minNodes", "exclusive"}, changedFields(old, p))
}
