package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestDeletePoolAsksForItsName(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	r := run(t, "dev-sandbx\n", "delete", "pool", "dev-sandbox")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, `Risk: critical: delete pool "dev-sandbox"
  Impact: 0 node(s) lose the pool's labels and taints and return to the default pool
  Impact: workloads that select this pool can no longer be scheduled
  Precaution: stop the pool's jobs and services first, and save their data
Type the name "dev-sandbox" to confirm: 
error: delete pool "dev-sandbox": not confirmed (typed "dev-sandbx", expected "dev-sandbox"); nothing was changed
`, r.Stderr)
	assertUnchanged(t, before)

	r = run(t, "dev-sandbox\n", "delete", "pool", "dev-sandbox")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "pool.runwhere.ai/dev-sandbox deleted\n", r.Stdout)
	_, err := pools().Get(ctx(), "dev-sandbox")
	assert.True(t, isNotFound(err))
}

func TestDeletePoolRefusedWhileWorkloadsRun(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	assert.Equal(t, "error: [R2] pool \"train-a100\" cannot be deleted: 2 workload pod(s) run on its nodes (ai-team/llama-train-0, ai-team/llama-train-1); wait for them to finish, or confirm with the annotation runwhere.ai/confirm-delete=train-a100 (kubectl litepool delete pool train-a100 --force), which leaves the pods running\n",
		fails(t, "delete", "pool", "train-a100", "--yes"))
	assert.Equal(t, "error: [R2] pool \"infer-a10\" cannot be deleted: 1 workload pod(s) run on its nodes (ai-team/qwen-infer); wait for them to finish, or confirm with the annotation runwhere.ai/confirm-delete=infer-a10 (kubectl litepool delete pool infer-a10 --force), which leaves the pods running\n",
		fails(t, "delete", "pool", "infer-a10", "--yes"))
	assert.Equal(t, "error: [R1] the default pool cannot be deleted: it is the nodes that belong to no pool\n", fails(t, "delete", "pool", "default", "--yes"))
	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"no-such-pool\" not found\n", fails(t, "delete", "pool", "no-such-pool", "--yes"))
	assert.Equal(t, "node/a100-node-1 unlabeled (server dry run)\nnode/a100-node-2 unlabeled (server dry run)\nnode/a100-node-3 unlabeled (server dry run)\n"+
		"pool.runwhere.ai/train-a100 deleted (server dry run; the delete itself was not sent: it needs runwhere.ai/confirm-delete written first)\n",
		must(t, "delete", "pool", "train-a100", "--force", "--dry-run=server"))
	assertUnchanged(t, before)
}

func TestDeletePoolForcedLeavesPodsRunning(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	before := snapshot(t)
	assert.Equal(t, "node/a100-node-1 unlabeled\nnode/a100-node-2 unlabeled\nnode/a100-node-3 unlabeled\npool.runwhere.ai/train-a100 deleted\n",
		must(t, "delete", "pool", "train-a100", "--force", "--yes"))
	_, err := pools().Get(ctx(), "train-a100")
	assert.True(t, isNotFound(err))
	after := snapshot(t)
	assert.Equal(t, before.Pods, after.Pods, "the pods were neither stopped nor moved")
	for _, name := range []string{"a100-node-1", "a100-node-2", "a100-node-3"} {
		assert.Equal(t, nodeState{Labels: withoutKeys(before.Nodes[name].Labels, "runwhere.ai/pool", "runwhere.ai/node-pool"), Annotations: map[string]string{}},
			after.Nodes[name], "%s: back in the default pool, no override left behind", name)
	}
	assert.Equal(t, []string{"RemovedFromPool: node a100-node-1 removed from pool train-a100: the pool was deleted"}, litepoolEvents(t, "a100-node-1"))
	assert.Equal(t, "default   Running   32    12    20    6\n", must(t, "get", "pools", "default", "--no-headers"))

	// A pool that exists only as labels is deleted by removing them.
	assert.Equal(t, "node/a10-node-1 unlabeled\nnode/a10-node-2 unlabeled\n", must(t, "delete", "pool", "infer-a10", "--force", "--yes"))
	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"infer-a10\" not found\n", fails(t, "get", "pool", "infer-a10"))
}

// A deletion interrupted half-way (one node released with its override still on it,
// as a run killed between its two updates leaves it) finishes when run again, with the
// webhook judging every write.
func TestDeletePoolForcedFinishesAnInterruptedRun(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	// a100-node-1 runs llama-train-0: its release needs the override, in the
	// documented "<who>: <why>" form, in the same update that removes its labels.
	changeNode(t, "a100-node-1", func(n *corev1.Node) { // the webhook admits the documented form
		delete(n.Labels, "runwhere.ai/pool")
		delete(n.Labels, "runwhere.ai/node-pool")
		n.Annotations["runwhere.ai/force"] = "alice: kubectl litepool delete pool train-a100 --force"
	})

	assert.Equal(t, "node/a100-node-1 unlabeled\nnode/a100-node-2 unlabeled\nnode/a100-node-3 unlabeled\npool.runwhere.ai/train-a100 deleted\n",
		must(t, "delete", "pool", "train-a100", "--force", "--yes"))
	_, err := pools().Get(ctx(), "train-a100")
	assert.True(t, isNotFound(err), "the Pool object is gone")
	after := snapshot(t)
	assert.Equal(t, before.Pods, after.Pods, "the pods keep running where they were")
	for _, name := range []string{"a100-node-1", "a100-node-2", "a100-node-3"} {
		assert.Equal(t, nodeState{Labels: withoutKeys(before.Nodes[name].Labels, "runwhere.ai/pool", "runwhere.ai/node-pool"), Annotations: map[string]string{}},
			after.Nodes[name], "%s: released, no override left behind", name)
	}
	// Run again once finished: nothing is left to do.
	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"train-a100\" not found\n", fails(t, "delete", "pool", "train-a100", "--force", "--yes"))
}
