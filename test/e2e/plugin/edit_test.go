package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// editorScript writes an $EDITOR that runs a sed script on the file it is given.
func editorScript(t *testing.T, sed string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "editor.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nsed -i -e '"+sed+"' \"$1\"\n"), 0o700))
	return []string{"KUBE_EDITOR=" + path}
}

func edit(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	env = append([]string{"KUBECONFIG=" + framework().Kubeconfig}, env...)
	r := framework().KubectlEnv(t, env, "", append([]string{"litepool", "edit", "pool"}, args...)...)
	return r.Stdout, r.Stderr, r.ExitCode
}

func TestEditPoolWithFlags(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	assert.Equal(t, "pool.runwhere.ai/train-a100 edited (server dry run)\n",
		must(t, "edit", "pool", "train-a100", "--description", "LLM pre-training", "--dry-run=server"))
	assertUnchanged(t, before)

	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\n",
		must(t, "edit", "pool", "train-a100", "--description", "LLM pre-training", "--tag", "team=llm", "--tag", "cost-center=42", "--min-nodes", "3"))
	p, err := pools().Get(ctx(), "train-a100")
	require.NoError(t, err)
	assert.Equal(t, "LLM pre-training", p.Spec.Description)
	assert.Equal(t, map[string]string{"team": "llm", "cost-center": "42"}, p.Spec.Tags)
	assert.Equal(t, int32(3), p.Spec.MinNodes)
	assert.Equal(t, before.Pools["train-a100"].Spec.HCCL, p.Spec.HCCL, "fields not edited stay as they were")

	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\n", must(t, "edit", "pool", "train-a100", "--tag", "cost-center-"))
	p, err = pools().Get(ctx(), "train-a100")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "llm"}, p.Spec.Tags)
	assert.Equal(t, "pool.runwhere.ai/train-a100 unchanged\n", must(t, "edit", "pool", "train-a100", "--tag", "team=llm"))

	// Making the pool exclusive taints its nodes; undoing it removes the taint.
	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\nnode/a100-node-1 tainted\nnode/a100-node-2 tainted\nnode/a100-node-3 tainted\n",
		must(t, "edit", "pool", "train-a100", "--exclusive"))
	assert.Equal(t, "runwhere.ai/pool=train-a100:NoSchedule", node(t, "a100-node-2").Spec.Taints[0].ToString())
	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\nnode/a100-node-1 untainted\nnode/a100-node-2 untainted\nnode/a100-node-3 untainted\n",
		must(t, "edit", "pool", "train-a100", "--exclusive=false"))
	assert.Empty(t, node(t, "a100-node-2").Spec.Taints)
}

func TestEditPoolInTheEditor(t *testing.T) {
	restoreAfter(t)
	stdout, stderr, code := edit(t, editorScript(t, "s/description: .*/description: edited in vi/; s/minNodes: 2/minNodes: 3/"), "train-a100")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\n", stdout)
	p, err := pools().Get(ctx(), "train-a100")
	require.NoError(t, err)
	assert.Equal(t, []any{"edited in vi", int32(3)}, []any{p.Spec.Description, p.Spec.MinNodes})

	// Saving without a change cancels.
	before := snapshot(t)
	stdout, stderr, code = edit(t, []string{"KUBE_EDITOR=true"}, "train-a100")
	assert.Equal(t, []any{0, "", "Edit cancelled, no changes made.\n"}, []any{code, stdout, stderr})
	assertUnchanged(t, before)
}

func TestEditPoolRefusals(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	// Edits that break a rule are refused and the file with the changes is kept.
	_, stderr, code := edit(t, editorScript(t, "s/type: A100-80G/type: H100-80G/"), "train-a100")
	assert.Equal(t, 1, code)
	assert.Equal(t, "error: pool \"train-a100\" was not changed:\n[R1] accelerator type of pool \"train-a100\" cannot change from \"A100-80G\" to \"H100-80G\" while it has 3 node(s); remove its nodes first\n", stderr)
	_, stderr, code = edit(t, editorScript(t, "s/name: train-a100/name: train-h100/"), "train-a100")
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^error: pool "train-a100" was not changed: the name cannot change \(to "train-h100"\); your changes are in /tmp/litepool-edit-\d+\.yaml\n$`, stderr)
	_, stderr, code = edit(t, editorScript(t, "s/minNodes: 2/minNode: 2/"), "train-a100")
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^error: pool "train-a100" was not changed: the edited file is not a valid Pool: unknown field "minNode"; your changes are in /tmp/litepool-edit-\d+\.yaml\n$`, stderr)

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"train-a100", "--min-nodes", "0"}, `error: [R1] --min-nodes 0: must be at least 1`},
		{[]string{"train-a100", "--type", "Batch"}, "error: pool \"train-a100\" was not changed:\n[R1] unknown pool type \"Batch\": must be one of Training, Inference, Development, Compute"},
		{[]string{"train-a100", "--tag", "team"}, `error: invalid --tag "team": expected KEY=VALUE or KEY-`},
		{[]string{"infer-a10", "--description", "x"}, `error: pool "infer-a10" has no Pool object (it exists only as labels on 2 node(s)): create one with kubectl litepool create -f, which adopts its nodes`},
		{[]string{"default", "--description", "x"}, `error: the default pool has no Pool object to edit: it is the nodes that belong to no pool`},
		{[]string{"no-such-pool", "--description", "x"}, `Error from server (NotFound): pools.runwhere.ai "no-such-pool" not found`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want+"\n", fails(t, append([]string{"edit", "pool"}, tt.args...)...), "%v", tt.args)
	}
	assertUnchanged(t, before)
}
