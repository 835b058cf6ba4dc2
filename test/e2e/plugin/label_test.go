package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLabelNodeMovesItBetweenPools(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	assert.Equal(t, "node/a100-node-4 labeled\n", must(t, "label", "node", "a100-node-4", "runwhere.ai/pool=train-a100"))
	assert.Equal(t, "train-a100", node(t, "a100-node-4").Labels["runwhere.ai/pool"])
	assert.Equal(t, "train-a100   Running   32    12    20    4\n", must(t, "get", "pools", "train-a100", "--no-headers"))
	assert.Equal(t, "node/a100-node-4 not labeled\n", must(t, "label", "node", "a100-node-4", "runwhere.ai/pool=train-a100"))

	assert.Equal(t, "node/a100-node-4 labeled\n", must(t, "label", "node", "a100-node-4", "runwhere.ai/pool-", "runwhere.ai/health=healthy"))
	n := node(t, "a100-node-4")
	assert.NotContains(t, n.Labels, "runwhere.ai/pool")
	assert.Equal(t, "healthy", n.Labels["runwhere.ai/health"])
	assert.Equal(t, []string{
		"AddedToPool: node a100-node-4 added to pool train-a100 (kubectl litepool label)",
		"RemovedFromPool: node a100-node-4 removed from pool train-a100 (kubectl litepool label)",
	}, litepoolEvents(t, "a100-node-4"))
}

func TestLabelNodeRefusesBadInputAndChangesNothing(t *testing.T) {
	restoreAfter(t)
	// minNodes 3 makes train-a100 unable to lose a node.
	p, err := pools().Get(ctx(), "train-a100")
	require.NoError(t, err)
	p.Spec.MinNodes = 3
	_, err = pools().Update(ctx(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	before := snapshot(t)

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no prefix", []string{"a100-node-4", "pool=train-a100"},
			`error: [N1] label key "pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`},
		{"no prefix gpu-type", []string{"a100-node-4", "gpu-type=A100-80G"},
			`error: [N1] label key "gpu-type" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/gpu-type"?`},
		{"dotted prefix", []string{"a100-node-4", "runwhere.ai.pool=train-a100"},
			`error: [N1] label key "runwhere.ai.pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`},
		{"not ours", []string{"a100-node-4", "team=llm"},
			`error: [N1] label key "team" is not a litepool key: litepool manages only keys under "runwhere.ai/" (runwhere.ai/driver-version, runwhere.ai/gpu-type, runwhere.ai/gpuType, runwhere.ai/health, runwhere.ai/job-type, runwhere.ai/namespace, runwhere.ai/node-pool, runwhere.ai/pool, runwhere.ai/port, runwhere.ai/priority, runwhere.ai/quota, runwhere.ai/workload-type)`},
		{"unknown key", []string{"a100-node-4", "runwhere.ai/pools=train-a100"},
			`error: [N1] unknown label key "runwhere.ai/pools": keys under "runwhere.ai/" must be one of runwhere.ai/driver-version, runwhere.ai/gpu-type, runwhere.ai/gpuType, runwhere.ai/health, runwhere.ai/job-type, runwhere.ai/namespace, runwhere.ai/node-pool, runwhere.ai/pool, runwhere.ai/port, runwhere.ai/priority, runwhere.ai/quota, runwhere.ai/workload-type`},
		{"annotation key", []string{"a100-node-4", "runwhere.ai/upgrade-state=done"},
			`error: [N1] "runwhere.ai/upgrade-state" is an annotation key, not a label key`},
		{"bad pool name", []string{"a100-node-4", "runwhere.ai/pool=Train"},
			`error: [N1] invalid value "Train" for label "runwhere.ai/pool": invalid pool name "Train": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`},
		{"bad health", []string{"a100-node-4", "runwhere.ai/health=ok"},
			`error: [N1] invalid value "ok" for label "runwhere.ai/health": must be one of healthy, degraded`},
		{"not a pair", []string{"a100-node-4", "runwhere.ai/pool"},
			`error: invalid label argument "runwhere.ai/pool": expected KEY=VALUE or KEY-`},
		{"no silent overwrite", []string{"a10-node-1", "runwhere.ai/pool=dev-sandbox"},
			`error: 'runwhere.ai/pool' already has a value (infer-a10), and --overwrite is false; nothing was changed`},
		{"accelerator mismatch", []string{"a10-node-1", "runwhere.ai/pool=train-a100", "--overwrite"},
			`error: [N2] node "a10-node-1" (gpu-type A10-24G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`},
		{"gpu-type change inside a pool", []string{"a100-node-3", "runwhere.ai/gpu-type=H100-80G", "--overwrite"},
			`error: [N2] node "a100-node-3" (gpu-type H100-80G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for H100-80G nodes`},
		{"leaving with workload pods", []string{"a100-node-1", "runwhere.ai/pool-"},
			`error: [N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`},
		{"below minNodes", []string{"a100-node-3", "runwhere.ai/pool-"},
			`error: [N3] node "a100-node-3" cannot leave pool "train-a100": the pool would have 2 Ready node(s), below its minNodes 3; lower spec.minNodes first or add a node (a NotReady member may leave)`},
		{"unknown node", []string{"no-such-node", "runwhere.ai/health=healthy"},
			`Error from server (NotFound): nodes "no-such-node" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want+"\n", fails(t, append([]string{"label", "node"}, tt.args...)...))
		})
	}
	assertUnchanged(t, before)

	// Dry runs say what would happen and change nothing.
	assert.Equal(t, "node/a100-node-4 labeled (server dry run)\n", must(t, "label", "node", "a100-node-4", "runwhere.ai/pool=train-a100", "--dry-run=server"))
	assert.Equal(t, "node/a100-node-4 labeled (dry run)\n", must(t, "label", "node", "a100-node-4", "runwhere.ai/pool=train-a100", "--dry-run=client"))
	assertUnchanged(t, before)
}

func TestCordonAndUncordon(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	before := snapshot(t)
	assert.Equal(t, "node/a100-node-3 cordoned (server dry run)\n", must(t, "cordon", "a100-node-3", "--dry-run=server"))
	assert.Equal(t, "node/a100-node-3\n", must(t, "cordon", "a100-node-3", "--dry-run=client", "-o", "name"), "-o name prints what kubectl prints")
	assertUnchanged(t, before)

	assert.Equal(t, "node/a100-node-3 cordoned\nnode/a100-node-4 cordoned\n", must(t, "cordon", "a100-node-3", "a100-node-4"))
	assert.True(t, node(t, "a100-node-3").Spec.Unschedulable)
	assert.Equal(t, "a100-node-3   train-a100   a100-np1   Cordoned   A100-80G   8     0     8\n", must(t, "get", "nodes", "a100-node-3", "--no-headers"))
	assert.Equal(t, "node/a100-node-3 already cordoned\n", must(t, "cordon", "a100-node-3"))
	assert.Equal(t, "node/a100-node-3 uncordoned\n", must(t, "uncordon", "a100-node-3"))
	assert.False(t, node(t, "a100-node-3").Spec.Unschedulable)
	assert.Equal(t, []string{
		"Cordoned: node a100-node-3 cordoned by kubectl litepool",
		"Uncordoned: node a100-node-3 uncordoned by kubectl litepool",
	}, litepoolEvents(t, "a100-node-3"))

	// An operator's cordon during a litepool operation is remembered: the operation
	// will not uncordon the node when it ends.
	changeNode(t, "a100-node-3", func(n *corev1.Node) { n.Annotations["runwhere.ai/was-cordoned-by-upgrade"] = "false" })
	must(t, "cordon", "a100-node-3")
	assert.Equal(t, "true", node(t, "a100-node-3").Annotations["runwhere.ai/was-cordoned-by-upgrade"])

	assert.Equal(t, "Error from server (NotFound): nodes \"no-such-node\" not found\n", fails(t, "cordon", "no-such-node"))
	assert.Equal(t, "Error from server (NotFound): nodes \"no-such-node\" not found\n", fails(t, "uncordon", "no-such-node"))
}

func TestDrain(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	pod := deployOn(t, "mover", "a100-node-3", false)
	assert.Equal(t, "node/a100-node-3 cordoned\nevicting pod ai-team/"+pod+"\npod/"+pod+" evicted\nnode/a100-node-3 drained\n",
		must(t, "drain", "a100-node-3", "--ignore-daemonsets", "--timeout=1m"))
	_, err := framework().Kube.CoreV1().Pods(ns).Get(ctx(), pod, metav1.GetOptions{})
	assert.True(t, isNotFound(err), "the evicted pod is gone: %v", err)
	assert.True(t, node(t, "a100-node-3").Spec.Unschedulable, "a drained node stays cordoned")
	assert.NotContains(t, node(t, "a100-node-3").Annotations, "runwhere.ai/draining")
	assert.Equal(t, []string{
		"Draining: draining node a100-node-3 (kubectl litepool drain)",
		"Drained: node a100-node-3 drained",
	}, litepoolEvents(t, "a100-node-3"))
}

func TestDrainRefusals(t *testing.T) {
	restoreAfter(t)
	guarded := deployOn(t, "guarded", "a100-node-3", true)
	before := snapshot(t)

	// Pods no controller manages need --force, as with kubectl; nothing is cordoned.
	assert.Equal(t, "error: node \"a100-node-1\" cannot be drained: cannot delete Pods that declare no controller (use --force to override): ai-team/llama-train-0\n",
		fails(t, "drain", "a100-node-1"))
	assertUnchanged(t, before)

	// A PodDisruptionBudget that allows no disruption blocks the eviction until the
	// timeout; the drain stops and names the pod. The node stays cordoned, as with
	// kubectl drain, and the pod keeps running.
	r := run(t, "", "drain", "a100-node-3", "--timeout=3s")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, "node/a100-node-3 cordoned\nevicting pod ai-team/"+guarded+"\n", r.Stdout)
	assert.Equal(t, "pod ai-team/"+guarded+": eviction refused, retrying: Cannot evict pod as it would violate the pod's disruption budget.\n"+
		"error: drain of node \"a100-node-3\" stopped: 1 pod(s) could not be evicted (ai-team/"+guarded+"): Cannot evict pod as it would violate the pod's disruption budget; wait until the PodDisruptionBudget allows it, scale the workload up, or raise --timeout\n", r.Stderr)
	after := snapshot(t)
	assert.Equal(t, before.Pods, after.Pods, "the guarded pod still runs")
	assert.True(t, node(t, "a100-node-3").Spec.Unschedulable)
	assert.NotContains(t, node(t, "a100-node-3").Annotations, "runwhere.ai/draining")

	// The dry runs change nothing.
	must(t, "uncordon", "a100-node-3")
	assert.Equal(t, "node/a100-node-3 cordoned (dry run)\nevicting pod ai-team/"+guarded+" (dry run)\nnode/a100-node-3 drained (dry run)\n",
		must(t, "drain", "a100-node-3", "--dry-run=client"))
	assertUnchanged(t, before)
	assert.Equal(t, "Error from server (NotFound): nodes \"no-such-node\" not found\n", fails(t, "drain", "no-such-node"))
}
