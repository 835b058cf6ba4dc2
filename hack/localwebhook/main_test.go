package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatches(t *testing.T) {
	const dir = "/repo/_output/dev/webhook"
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"/repo/_output/bin/litepool-webhook", "--port=1", "--cert-dir=/repo/_output/dev/webhook/certs"}, true},
		{[]string{"litepool-webhook", "--cert-dir=/repo/_output/dev/webhook/certs"}, true},
		{[]string{"/repo/_output/bin/litepool-webhook", "--cert-dir=/repo/_output/e2e/webhook/certs"}, false},
		{[]string{"/repo/_output/bin/litepool-webhook", "--cert-dir=/repo/_output/dev/webhook/certs2"}, false},
		{[]string{"/repo/_output/bin/litepool-webhook"}, false},
		{[]string{"vi", "--cert-dir=/repo/_output/dev/webhook/certs"}, false},
		{[]string{"pgrep", "-f", "litepool-webhook", "--cert-dir=/repo/_output/dev/webhook/certs"}, false},
	} {
		assert.Equal(t, tc.want, matches(dir, tc.args), "%q", tc.args)
	}
}

func TestState(t *testing.T) {
	dir := t.TempDir()
	_, ok := readState(dir)
	assert.False(t, ok, "no state yet")
	st := state{PID: 42, Addr: "127.0.0.1:1", Probe: "127.0.0.1:2", Metrics: "127.0.0.1:3", KubeconfigSHA256: "ab"}
	require.NoError(t, writeState(dir, st))
	got, ok := readState(dir)
	require.True(t, ok)
	assert.Equal(t, st, got)
	pid, err := os.ReadFile(filepath.Join(dir, "webhook.pid"))
	require.NoError(t, err)
	assert.Equal(t, "42\n", string(pid))
	removeState(dir)
	_, ok = readState(dir)
	assert.False(t, ok, "state removed")
	_, err = os.Stat(filepath.Join(dir, "webhook.pid"))
	assert.True(t, os.IsNotExist(err))
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhook.log")
	require.NoError(t, os.WriteFile(path, []byte("1\n2\n3\n4\n"), 0o600))
	assert.Equal(t, "webhook log ("+path+"):\n3\n4", tail(path, 2))
	assert.Equal(t, "", tail(filepath.Join(t.TempDir(), "missing"), 2))
}
