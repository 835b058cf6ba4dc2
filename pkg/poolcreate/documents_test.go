package poolcreate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadDocuments(t *testing.T) {
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

	docs, err := ReadDocuments([]string{dir}, false, nil)
	require.NoError(t, err)
	require.Len(t, docs, 2)
	assert.Equal(t, []string{"pool-a", "pool-b"}, []string{docs[0].Pool.Name, docs[1].Pool.Name})
	assert.Equal(t, filepath.Join(dir, "a.yaml"), docs[0].Source, "a file with one document is named alone")
	assert.Equal(t, "A100", docs[0].Pool.Spec.Accelerator.Type)
	assert.Equal(t, int32(2), docs[1].Pool.Spec.MinNodes)
	assert.Equal(t, v1alpha1.PoolStatus{}, docs[1].Pool.Status, "a status in the file is not sent")

	docs, err = ReadDocuments([]string{dir}, true, nil)
	require.NoError(t, err)
	assert.Len(t, docs, 3, "-R reads subdirectories")

	docs, err = ReadDocuments([]string{"-"}, false, strings.NewReader("kind: pool\nversion: v0.1\npool: {name: pool-d}\n"))
	require.NoError(t, err)
	assert.Equal(t, "-", docs[0].Source)
}
