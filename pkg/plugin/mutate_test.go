package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func TestParseLabelArgs(t *testing.T) {
	set, remove, err := ParseLabelArgs([]string{"runwhere.ai/pool=train-a100", "runwhere.ai/health-", "runwhere.ai/gpu-type="})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"runwhere.ai/pool": "train-a100", "runwhere.ai/gpu-type": ""}, set)
	assert.Equal(t, []string{"runwhere.ai/health"}, remove)

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"pool=x"}, `[N1] label key "pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`},
		{[]string{"pool-"}, `[N1] label key "pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`},
		{[]string{"runwhere.ai/pool=pool-a", "runwhere.ai/pool=pool-b"}, `label "runwhere.ai/pool" is given twice`},
		{[]string{"runwhere.ai/pool=train-a100", "runwhere.ai/pool-"}, `label "runwhere.ai/pool" is both set and removed`},
		{[]string{"runwhere.ai/workload-type=batch"}, `[N1] invalid value "batch" for label "runwhere.ai/workload-type": unknown workload type "batch": must be one of training, inference, development, compute`},
		{[]string{"runwhere.ai/pool"}, `invalid label argument "runwhere.ai/pool": expected KEY=VALUE or KEY-`},
	}
	for _, tt := range tests {
		_, _, err := ParseLabelArgs(tt.args)
		assert.EqualError(t, err, tt.want, "%v", tt.args)
	}
}

func TestReadPoolDocuments(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o700))
	write := func(path, content string) {
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	}
	write(filepath.Join(dir, "a.yaml"), "# only a comment\n---\nkind: pool\nversion: v0.1\npool:\n  name: pool-a\n  nodes:\n    n1: {gpu-type: A100}\n---\n")
	write(filepath.Join(dir, "b.json"), `{"apiVersion": "runwhere.ai/v1alpha1", "kind": "Pool", "metadata": {"name": "pool-b"}, "spec": {"minNodes": 2}, "status": {"nodeCount": 9}}`)
	write(filepath.Join(dir, "notes.txt"), "not a pool")
	write(filepath.Join(sub, "c.yml"), "apiVersion: runwhere.ai/v1alpha1\nkind: Pool\nmetadata: {name: pool-c}\n")

	docs, err := ReadPoolDocuments([]string{dir}, false, nil)
	require.NoError(t, err)
	require.Len(t, docs, 2)
	assert.Equal(t, []string{"pool-a", "pool-b"}, []string{docs[0].pool.Name, docs[1].pool.Name})
	assert.Equal(t, filepath.Join(dir, "a.yaml"), docs[0].source, "a file with one document is named alone")
	assert.Equal(t, "A100", docs[0].pool.Spec.Accelerator.Type)
	assert.Equal(t, int32(2), docs[1].pool.Spec.MinNodes)
	assert.Equal(t, v1alpha1.PoolStatus{}, docs[1].pool.Status, "a status in the file is not sent")

	docs, err = ReadPoolDocuments([]string{dir}, true, nil)
	require.NoError(t, err)
	assert.Len(t, docs, 3, "-R reads subdirectories")

	docs, err = ReadPoolDocuments([]string{"-"}, false, strings.NewReader("kind: pool\nversion: v0.1\npool: {name: pool-d}\n"))
	require.NoError(t, err)
	assert.Equal(t, "-", docs[0].source)
}

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
