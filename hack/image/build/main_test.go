package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The archives are written again only when an input changed, and a run that finds them
// up to date prints what the run that wrote them printed.
func TestArchivesAreWrittenOnlyWhenAnInputChanged(t *testing.T) {
	bin, root, out := t.TempDir(), t.TempDir(), t.TempDir()
	for _, name := range []string{"litepool-webhook", "kubectl-litepool", "litepool-testbin"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/true\n"+name), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "LICENSE"), []byte("license"), 0o644))
	archive := filepath.Join(out, "litepool-webhook.tar")

	first := runPrinting(t, bin, out, root, "v0.1.0")
	assert.Contains(t, first, "litepool-webhook.tar  "+TestWebhook+"  sha256:")
	written := modTime(t, archive)

	again := runPrinting(t, bin, out, root, "v0.1.0")
	assert.Equal(t, first, again)
	assert.Equal(t, written, modTime(t, archive), "same inputs: not written again")

	require.NoError(t, os.WriteFile(filepath.Join(bin, "litepool-webhook"), []byte("#!/bin/true\nchanged"), 0o755))
	changed := runPrinting(t, bin, out, root, "v0.1.0")
	assert.NotEqual(t, first, changed, "a changed binary is a new image")

	require.NoError(t, os.Remove(filepath.Join(out, "test-images.tar")))
	runPrinting(t, bin, out, root, "v0.1.0")
	assert.FileExists(t, filepath.Join(out, "test-images.tar"), "a missing archive is written again")

	other := runPrinting(t, bin, out, root, "v0.2.0")
	assert.Contains(t, other, "ghcr.io/runwhere-ai/litepool-webhook:v0.2.0", "another version is another tag")
}

// runPrinting runs the command's work with its standard output captured.
func runPrinting(t *testing.T, bin, out, root, version string) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	runErr := run(bin, out, root, version, "ghcr.io/runwhere-ai/litepool-webhook")
	os.Stdout = stdout
	require.NoError(t, w.Close())
	var buf bytes.Buffer
	_, err = io.Copy(&buf, r)
	require.NoError(t, err)
	require.NoError(t, runErr)
	return buf.String()
}

func modTime(t *testing.T, name string) int64 {
	t.Helper()
	st, err := os.Stat(name)
	require.NoError(t, err)
	return st.ModTime().UnixNano()
}
