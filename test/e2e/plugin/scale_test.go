package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScaleUp(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	before := snapshot(t)
	assert.Equal(t, "node/a100-node-4 added to pool train-a100 (server dry run)\npool.runwhere.ai/train-a100 scaled from 3 to 4 node(s) (server dry run)\n",
		must(t, "scale", "train-a100", "--nodes", "4", "--dry-run=server"))
	assertUnchanged(t, before)

	assert.Equal(t, "node/a100-node-4 added to pool train-a100\npool.runwhere.ai/train-a100 scaled from 3 to 4 node(s)\n",
		must(t, "scale", "train-a100", "--nodes", "4"))
	assert.Equal(t, "train-a100   Running   32    12    20    4\n", must(t, "get", "pools", "train-a100", "--no-headers"))
	assert.Equal(t, []string{"AddedToPool: node a100-node-4 added to pool train-a100"}, litepoolEvents(t, "a100-node-4"))
	assert.Equal(t, "pool.runwhere.ai/train-a100 already has 4 node(s)\n", must(t, "scale", "train-a100", "--nodes", "4"))
}

func TestScaleUpAddsNamedNodesAndTaintsForExclusivePools(t *testing.T) {
	restoreAfter(t)
	addKwokNode(t, "a100-node-9", map[string]string{"runwhere.ai/gpu-type": "A100-80G"})
	p, err := pools().Get(ctx(), "train-a100")
	require.NoError(t, err)
	p.Spec.Exclusive = true
	_, err = pools().Update(ctx(), p, metav1.UpdateOptions{})
	require.NoError(t, err)

	assert.Equal(t, "node/a100-node-4 added to pool train-a100\nnode/a100-node-9 added to pool train-a100\npool.runwhere.ai/train-a100 scaled from 3 to 5 node(s)\n",
		must(t, "scale", "train-a100", "--add", "a100-node-4,a100-node-9"))
	n := node(t, "a100-node-9")
	assert.Equal(t, "train-a100", n.Labels["runwhere.ai/pool"])
	// The node lifecycle controller may still hold node.kubernetes.io/not-ready on the new
	// node; look only at litepool's taint.
	var ours []string
	for _, taint := range n.Spec.Taints {
		if taint.Key == "runwhere.ai/pool" {
			ours = append(ours, taint.ToString())
		}
	}
	assert.Equal(t, []string{"runwhere.ai/pool=train-a100:NoSchedule"}, ours)
}

func TestScaleUpRefusals(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"accelerator mismatch", []string{"dev-sandbox", "--add", "a100-node-4"},
			"error: pool \"dev-sandbox\" was not scaled:\n[N2] node \"a100-node-4\" (gpu-type A100-80G) cannot join pool \"dev-sandbox\": the pool takes only A10-24G nodes; choose a node labelled runwhere.ai/gpu-type=A10-24G or a pool for A100-80G nodes"},
		{"no matching node", []string{"dev-sandbox", "--nodes", "1"},
			"error: [S1] pool \"dev-sandbox\" needs 1 more node(s) but the default pool has 0 Running node(s) of gpu-type A10-24G; these default-pool nodes do not match it: a100-node-4 (A100-80G), cpu-node-1 (none), cpu-node-2 (none); add A10-24G nodes to the cluster or ask for fewer"},
		{"not enough nodes", []string{"train-a100", "--nodes", "5"},
			"error: [S1] pool \"train-a100\" needs 2 more node(s) but the default pool has 1 Running node(s) of gpu-type A100-80G (a100-node-4); these default-pool nodes do not match it: cpu-node-1 (none), cpu-node-2 (none); add A100-80G nodes to the cluster or ask for fewer"},
		{"node of another pool", []string{"train-a100", "--add", "a10-node-1"},
			"error: pool \"train-a100\" was not scaled:\n[S1] node \"a10-node-1\" belongs to pool \"infer-a10\", not to the default pool: remove it from \"infer-a10\" first (kubectl litepool scale infer-a10 --remove a10-node-1)"},
		{"one bad node stops all", []string{"train-a100", "--add", "a100-node-4", "--add", "cpu-node-1"},
			"error: pool \"train-a100\" was not scaled:\n[N2] node \"cpu-node-1\" (gpu-type none) cannot join pool \"train-a100\": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for none nodes"},
		{"unknown node", []string{"train-a100", "--add", "no-such-node"},
			"error: pool \"train-a100\" was not scaled:\nnodes \"no-such-node\" not found"},
		{"unknown pool", []string{"no-such-pool", "--nodes", "2"},
			"Error from server (NotFound): pools.runwhere.ai \"no-such-pool\" not found"},
		{"default pool", []string{"default", "--nodes", "2"},
			"error: the default pool cannot be scaled: it is the nodes that belong to no pool; scale the pool you want the nodes in or out of"},
		{"no way given", []string{"train-a100"},
			"error: give exactly one of --nodes N, --add NODE... or --remove NODE..."},
		{"two ways given", []string{"train-a100", "--nodes", "4", "--add", "a100-node-4"},
			"error: give exactly one of --nodes N, --add NODE... or --remove NODE..."},
		{"negative size", []string{"train-a100", "--nodes", "-1"},
			"error: invalid --nodes -1: it is the number of nodes the pool should have, 0 or more (a scale-down stops at the pool's minNodes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want+"\n", fails(t, append([]string{"scale"}, tt.args...)...))
		})
	}
	assertUnchanged(t, before)
}

// A node already in the pool is no error: the scale finds its work done and says so.
func TestScaleUpNodeAlreadyInPool(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	assert.Equal(t, "node/a100-node-1 already in pool train-a100\npool.runwhere.ai/train-a100 already has 3 node(s)\n",
		must(t, "scale", "train-a100", "--add", "a100-node-1"))
	assertUnchanged(t, before)
}

func TestScaleDownIdleNodesFirst(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	before := snapshot(t)
	assert.Equal(t, "node/a100-node-3 cordoned (dry run)\nnode/a100-node-3 drained (dry run)\nnode/a100-node-3 removed from pool train-a100 (dry run)\nnode/a100-node-3 uncordoned (dry run)\npool.runwhere.ai/train-a100 scaled from 3 to 2 node(s) (dry run)\n",
		must(t, "scale", "train-a100", "--nodes", "2", "--dry-run=client"))
	assertUnchanged(t, before)

	// a100-node-3 is the only idle member: it goes, the busy ones stay.
	r := run(t, "yes\n", "scale", "train-a100", "--nodes", "2")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "node/a100-node-3 cordoned\nnode/a100-node-3 drained\nnode/a100-node-3 removed from pool train-a100\nnode/a100-node-3 uncordoned\npool.runwhere.ai/train-a100 scaled from 3 to 2 node(s)\n", r.Stdout)
	assert.Equal(t, `Risk: high: scale down pool "train-a100" from 3 to 2 node(s)
  Impact: node(s) a100-node-3 are cordoned and drained, then leave the pool and return, uncordoned, to the default pool
  Impact: no workload pods run on them
  Precaution: let jobs checkpoint first; PodDisruptionBudgets are respected, and a blocked drain puts everything back
Type "yes" to confirm: 
`, r.Stderr)
	n := node(t, "a100-node-3")
	assert.Equal(t, nodeState{Labels: withoutKeys(before.Nodes["a100-node-3"].Labels, "runwhere.ai/pool", "runwhere.ai/node-pool"), Annotations: map[string]string{}},
		stateOf(n), "out of the pool and its node pool, schedulable, no litepool annotations left")
	assert.Equal(t, []string{
		"RemovingFromPool: removing node a100-node-3 from pool train-a100",
		"RemovedFromPool: node a100-node-3 removed from pool train-a100",
	}, litepoolEvents(t, "a100-node-3"))
	assert.Equal(t, "train-a100   Running   16    12    4     2\n", must(t, "get", "pools", "train-a100", "--no-headers"))
}

func TestScaleDownRefusals(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"below minNodes", "", []string{"train-a100", "--nodes", "1", "--yes"},
			"error: [N3] pool \"train-a100\" cannot shrink from 3 to 1 node(s): its minNodes is 2; lower spec.minNodes first (kubectl litepool edit pool train-a100 --min-nodes 1) or remove fewer nodes\n"},
		{"named nodes below minNodes", "", []string{"train-a100", "--remove", "a100-node-2,a100-node-3", "--yes"},
			"error: [N3] pool \"train-a100\" cannot shrink from 3 to 1 node(s): its minNodes is 2; lower spec.minNodes first (kubectl litepool edit pool train-a100 --min-nodes 1) or remove fewer nodes\n"},
		{"not a member", "", []string{"train-a100", "--remove", "a100-node-4", "--yes"},
			"error: [S2] node \"a100-node-4\" is not a member of pool \"train-a100\"; its members are: a100-node-1, a100-node-2, a100-node-3\n"},
		{"unmanaged pods need --force", "", []string{"train-a100", "--remove", "a100-node-1", "--yes"},
			"error: pool \"train-a100\" was not scaled:\nnode \"a100-node-1\" cannot be drained: cannot delete Pods that declare no controller (use --force to override): ai-team/llama-train-0\n"},
		{"not confirmed", "no\n", []string{"train-a100", "--nodes", "2"},
			"Risk: high: scale down pool \"train-a100\" from 3 to 2 node(s)\n  Impact: node(s) a100-node-3 are cordoned and drained, then leave the pool and return, uncordoned, to the default pool\n  Impact: no workload pods run on them\n  Precaution: let jobs checkpoint first; PodDisruptionBudgets are respected, and a blocked drain puts everything back\nType \"yes\" to confirm: \n" +
				"error: scale down pool \"train-a100\" from 3 to 2 node(s): not confirmed (typed \"no\", expected \"yes\"); nothing was changed\n"},
		{"no answer", "", []string{"train-a100", "--remove", "a100-node-3", "--delete-node"},
			"Risk: high: scale down pool \"train-a100\" from 3 to 2 node(s)\n  Impact: node(s) a100-node-3 are cordoned and drained, then leave the pool and their Node objects are deleted\n  Impact: no workload pods run on them\n  Precaution: let jobs checkpoint first; PodDisruptionBudgets are respected, and a blocked drain puts everything back\nType \"yes\" to confirm: \n" +
				"error: scale down pool \"train-a100\" from 3 to 2 node(s): not confirmed (no answer on standard input); nothing was changed; pass --yes to skip the prompt\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.stdin, append([]string{"scale"}, tt.args...)...)
			assert.Equal(t, 1, r.ExitCode)
			assert.Equal(t, tt.want, r.Stderr)
			assert.Empty(t, r.Stdout)
		})
	}
	assertUnchanged(t, before)
}

func TestScaleDownBlockedByPDBPutsEverythingBack(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	guarded := deployOn(t, "guarded", "a100-node-3", true)
	before := snapshot(t)

	r := run(t, "", "scale", "train-a100", "--remove", "a100-node-3", "--timeout=3s", "--yes")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, "node/a100-node-3 cordoned\nevicting pod ai-team/"+guarded+"\n", r.Stdout)
	assert.Equal(t, "pod ai-team/"+guarded+": eviction refused, retrying: Cannot evict pod as it would violate the pod's disruption budget.\n"+
		"error: scale-down of pool \"train-a100\" stopped: drain of node \"a100-node-3\" stopped: 1 pod(s) could not be evicted (ai-team/"+guarded+"): Cannot evict pod as it would violate the pod's disruption budget; wait until the PodDisruptionBudget allows it, scale the workload up, or raise --timeout\n"+
		"no node left the pool; put back: a100-node-3 (uncordoned)\n", r.Stderr)
	assertUnchanged(t, before)
	assert.Equal(t, []string{
		"RemovingFromPool: removing node a100-node-3 from pool train-a100",
		"ScaleDownStopped: scale-down of pool train-a100 stopped: node a100-node-3 stays in the pool: drain of node \"a100-node-3\" stopped: 1 pod(s) could not be evicted (ai-team/" + guarded + "): Cannot evict pod as it would violate the pod's disruption budget; wait until the PodDisruptionBudget allows it, scale the workload up, or raise --timeout",
	}, litepoolEvents(t, "a100-node-3"))

	// A node that was cordoned before stays cordoned when the scale-down is put back.
	must(t, "cordon", "a100-node-3")
	cordoned := snapshot(t)
	r = run(t, "", "scale", "train-a100", "--remove", "a100-node-3", "--timeout=2s", "--yes")
	assert.Equal(t, 1, r.ExitCode)
	assert.Contains(t, r.Stderr, "\nno node left the pool; put back: a100-node-3 (stays cordoned, as it was before)\n")
	assertUnchanged(t, cordoned)
}

func TestScaleDownEvictsAndDeletesNode(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	addKwokNode(t, "a100-node-9", map[string]string{"runwhere.ai/gpu-type": "A100-80G", "runwhere.ai/pool": "train-a100"})
	pod := deployOn(t, "mover", "a100-node-9", false)
	r := run(t, "", "scale", "train-a100", "--remove", "a100-node-9", "--delete-node", "--yes")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "node/a100-node-9 cordoned\nevicting pod ai-team/"+pod+"\npod/"+pod+" evicted\nnode/a100-node-9 drained\nnode/a100-node-9 removed from pool train-a100\nnode/a100-node-9 deleted\npool.runwhere.ai/train-a100 scaled from 4 to 3 node(s)\n", r.Stdout)
	_, err := framework().Kube.CoreV1().Nodes().Get(ctx(), "a100-node-9", metav1.GetOptions{})
	assert.True(t, isNotFound(err), "the node is deleted: %v", err)
	_, err = framework().Kube.CoreV1().Pods(ns).Get(ctx(), pod, metav1.GetOptions{})
	assert.True(t, isNotFound(err), "its pod was evicted: %v", err)
}

func TestScaleDownResumesAnInterruptedOne(t *testing.T) {
	restoreAfter(t)
	// An earlier scale-down stopped after cordoning a100-node-2 (busy).
	changeNode(t, "a100-node-2", func(n *corev1.Node) {
		n.Annotations["runwhere.ai/scale-down"] = "train-a100"
		n.Annotations["runwhere.ai/was-cordoned-by-scale-down"] = "false"
		n.Spec.Unschedulable = true
	})

	// Run again, it finishes with that node rather than the idle a100-node-3.
	r := run(t, "", "scale", "train-a100", "--nodes", "2", "--force", "--yes")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "node/a100-node-2 cordoned\nevicting pod ai-team/llama-train-1\npod/llama-train-1 evicted\nnode/a100-node-2 drained\nnode/a100-node-2 removed from pool train-a100\nnode/a100-node-2 uncordoned\npool.runwhere.ai/train-a100 scaled from 3 to 2 node(s)\n", r.Stdout)
	assert.Equal(t, "a100-node-1 a100-node-3", must(t, "get", "nodes", "--pool", "train-a100", "-o", "jsonpath={.items[*].metadata.name}"))
	assert.Equal(t, nodeState{Labels: withoutKeys(node(t, "a100-node-2").Labels), Annotations: map[string]string{}}, stateOf(node(t, "a100-node-2")))
}

func withoutKeys(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// A scale-down and a driver upgrade overlap on a node: the scale-down that ends (here,
// put back after a blocked drain) never uncordons a node the upgrade still holds, and
// leaves the upgrade's memory alone.
func TestScaleDownNeverUncordonsANodeAnUpgradeHolds(t *testing.T) {
	restoreAfter(t)
	deployOn(t, "guarded", "a100-node-3", true)
	changeNode(t, "a100-node-3", func(n *corev1.Node) { // an upgrade cordoned it (it was schedulable)
		n.Annotations["runwhere.ai/was-cordoned-by-upgrade"] = "false"
		n.Spec.Unschedulable = true
	})
	r := run(t, "", "scale", "train-a100", "--remove", "a100-node-3", "--timeout=2s", "--yes")
	assert.Equal(t, 1, r.ExitCode)
	assert.Contains(t, r.Stderr, "\nno node left the pool; put back: a100-node-3 (stays cordoned: litepool's upgrade still holds it)\n")
	n := node(t, "a100-node-3")
	assert.True(t, n.Spec.Unschedulable, "the upgrade still relies on the cordon")
	assert.Equal(t, "false", n.Annotations["runwhere.ai/was-cordoned-by-upgrade"], "the upgrade's memory is its own")
	assert.NotContains(t, n.Annotations, "runwhere.ai/was-cordoned-by-scale-down")
	assert.NotContains(t, n.Annotations, "runwhere.ai/scale-down")
}
