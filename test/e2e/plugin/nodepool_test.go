package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// declareNodePool adds a node pool to train-a100's spec.
func declareNodePool(t *testing.T, np v1alpha1.NodePool) {
	t.Helper()
	p, err := pools().Get(ctx(), "train-a100")
	require.NoError(t, err)
	found := false
	for i := range p.Spec.NodePools {
		if p.Spec.NodePools[i].Name == np.Name {
			p.Spec.NodePools[i], found = np, true
		}
	}
	if !found {
		p.Spec.NodePools = append(p.Spec.NodePools, np)
	}
	_, err = pools().Update(ctx(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestNodePoolMembership(t *testing.T) {
	restoreAfter(t)
	np2 := v1alpha1.NodePool{Name: "a100-np2", Labels: map[string]string{"runwhere.ai/workload-type": "training", "team": "llm"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule}}}
	declareNodePool(t, np2)

	assert.Equal(t, "node/a100-node-3 removed from node pool a100-np1\n", must(t, "nodepool", "remove", "a100-np1", "a100-node-3", "--pool", "train-a100"))
	assert.Equal(t, "node/a100-node-3 added to node pool a100-np2 (dry run)\n", must(t, "nodepool", "add", "a100-np2", "a100-node-3", "--pool", "train-a100", "--dry-run=client"))
	assert.Equal(t, "node/a100-node-3 added to node pool a100-np2\n", must(t, "nodepool", "add", "a100-np2", "a100-node-3", "--pool", "train-a100"))
	n := node(t, "a100-node-3")
	assert.Equal(t, []string{"a100-np2", "training", "llm"}, []string{n.Labels["runwhere.ai/node-pool"], n.Labels["runwhere.ai/workload-type"], n.Labels["team"]})
	assert.Equal(t, "dedicated=llm:NoSchedule", n.Spec.Taints[0].ToString())
	assert.Equal(t, `POOL         NODE POOL   STATUS    NODES   GPU TOTAL   GPU USED   GPU FREE   LABELS                                        TAINTS
train-a100   a100-np1    Running   2       16          12         4          <none>                                        <none>
train-a100   a100-np2    Running   1       8           0          8          runwhere.ai/workload-type=training,team=llm   dedicated=llm:NoSchedule
`, must(t, "get", "nodepools", "-o", "wide"))

	// Change the node pool's labels and taints, then apply them to its members.
	np2.Labels = map[string]string{"runwhere.ai/workload-type": "training", "team": "infra"}
	np2.Taints[0].Value = "infra"
	declareNodePool(t, np2)
	assert.Equal(t, "node/a100-node-3 configured\n", must(t, "nodepool", "apply", "a100-np2", "--pool", "train-a100"))
	assert.Equal(t, "node/a100-node-3 unchanged\n", must(t, "nodepool", "apply", "a100-np2", "--pool", "train-a100"))
	n = node(t, "a100-node-3")
	assert.Equal(t, "infra", n.Labels["team"])
	assert.Equal(t, []string{"dedicated=infra:NoSchedule"}, []string{n.Spec.Taints[0].ToString()})

	// Leaving the node pool takes its labels and taints away; the node stays in the pool.
	assert.Equal(t, "node/a100-node-3 removed from node pool a100-np2\n", must(t, "nodepool", "remove", "a100-np2", "a100-node-3", "--pool", "train-a100"))
	n = node(t, "a100-node-3")
	assert.Equal(t, "train-a100", n.Labels["runwhere.ai/pool"])
	assert.NotContains(t, n.Labels, "team")
	assert.Empty(t, n.Spec.Taints)
}

func TestNodePoolRefusals(t *testing.T) {
	restoreAfter(t)
	declareNodePool(t, v1alpha1.NodePool{Name: "a100-np2"})
	declareNodePool(t, v1alpha1.NodePool{Name: "a100-bad", Labels: map[string]string{"workload-type": "training"}})
	before := snapshot(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"add", "a100-np9", "a100-node-3", "--pool", "train-a100"},
			`error: node pool "a100-np9" is not declared in pool "train-a100" (declared: a100-np1, a100-np2, a100-bad): add it to spec.nodePools with kubectl litepool edit pool train-a100`},
		{[]string{"add", "a100-np2", "a100-node-4", "a100-node-1", "--pool", "train-a100"},
			"error: nothing was changed:\nnode \"a100-node-4\" is in pool \"default\", not in pool \"train-a100\": add it to the pool first (kubectl litepool scale train-a100 --add a100-node-4)\nnode \"a100-node-1\" is in node pool \"a100-np1\": take it out first (kubectl litepool nodepool remove a100-np1 a100-node-1 --pool train-a100)"},
		{[]string{"remove", "a100-np2", "a100-node-1", "--pool", "train-a100"},
			"error: nothing was changed:\nnode \"a100-node-1\" is not in node pool \"a100-np2\" (its node pool: a100-np1)"},
		{[]string{"apply", "a100-bad", "--pool", "train-a100"},
			`error: node pool "a100-bad": [N1] label key "workload-type" looks like litepool's "runwhere.ai/workload-type": use "runwhere.ai/workload-type"`},
		{[]string{"add", "a100-np1", "a10-node-1", "--pool", "infer-a10"},
			`error: pool "infer-a10" has no Pool object, so no node pools are declared: create one with kubectl litepool create -f`},
		{[]string{"add", "a100-np1", "a100-node-3"}, `error: --pool is required: node pool names are unique only inside a pool`},
		{[]string{"apply", "a100-np1", "--pool", "no-such-pool"}, `Error from server (NotFound): pools.runwhere.ai "no-such-pool" not found`},
		{[]string{"add", "a100-np1", "no-such-node", "--pool", "train-a100"}, "error: nothing was changed:\nnodes \"no-such-node\" not found"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want+"\n", fails(t, append([]string{"nodepool"}, tt.args...)...), "%v", tt.args)
	}
	assertUnchanged(t, before)
}
