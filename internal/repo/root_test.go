package repo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRootIsTheModulesDirectory(t *testing.T) {
	root := Root()
	assert.FileExists(t, filepath.Join(root, "go.mod"))
	assert.DirExists(t, filepath.Join(root, "internal", "repo"))
}

func TestAnotherModulesGoModIsPassedOver(t *testing.T) {
	outer := t.TempDir()
	inner := filepath.Join(outer, "tools")
	require.NoError(t, os.MkdirAll(filepath.Join(inner, "deep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outer, "go.mod"), []byte(module+"\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(inner, "go.mod"), []byte("module example.com/tools\n"), 0o644))
	got, err := rootAbove(filepath.Join(inner, "deep"))
	require.NoError(t, err)
	assert.Equal(t, outer, got)
}

func TestOutsideTheRepositoryIsAnError(t *testing.T) {
	_, err := rootAbove(t.TempDir())
	assert.ErrorContains(t, err, "no go.mod of github.com/runwhere-ai/litepool above")
}
