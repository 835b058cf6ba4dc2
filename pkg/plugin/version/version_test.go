package version

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runwhere-ai/litepool/pkg/version"
)

func run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := NewCmdVersion(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

func TestVersionOutputs(t *testing.T) {
	info := version.Get()
	out, err := run()
	require.NoError(t, err)
	assert.Equal(t, "litepool "+info.Version+" (commit "+info.Commit+", "+info.GoVersion+", "+info.Platform+")\n", out)

	out, err = run("-o", "json")
	require.NoError(t, err)
	var got version.Info
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, info, got)

	out, err = run("-o", "jsonpath={.version} {.goVersion}")
	require.NoError(t, err)
	assert.Equal(t, info.Version+" "+info.GoVersion, out)

	out, err = run("-o", "yaml")
	require.NoError(t, err)
	assert.Contains(t, out, "version: "+info.Version+"\n")

	_, err = run("-o", "wide")
	assert.ErrorContains(t, err, `invalid -o "wide": must be one of json, yaml, jsonpath`)
}
