package nodepool

import (
	"context"
	"errors"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var dedicated = corev1.Taint{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule}

func node(name, pool, nodePool string) *corev1.Node {
	labels := map[string]string{}
	if pool != "" {
		labels[policy.LabelPool] = pool
	}
	if nodePool != "" {
		labels[policy.LabelNodePool] = nodePool
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// cluster: train-a100 declares np1 (team=llm, a dedicated taint) and np2, and holds n1 and n2
// (in no node pool) and n3 (in np1, with its label and taint); n4 is in no pool;
// infer-a10 is a pool of labels only (g1).
func cluster(t *testing.T) *kittest.Factory {
	n3 := node("n3", "train-a100", "np1")
	n3.Labels["team"] = "llm"
	n3.Spec.Taints = []corev1.Taint{dedicated}
	return kittest.NewFactory(t,
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{NodePools: []v1alpha1.NodePool{
			{Name: "np1", Labels: map[string]string{"team": "llm"}, Taints: []corev1.Taint{dedicated}}, {Name: "np2"}}}},
		node("n1", "train-a100", ""), node("n2", "train-a100", ""), n3, node("n4", "", ""), node("g1", "infer-a10", ""),
	)
}

var add, remove, apply = NewCmdNodePoolAdd, NewCmdNodePoolRemove, NewCmdNodePoolApply

// member says what the node carries of np1: its node-pool label, team label and taints.
func member(t *testing.T, f *kittest.Factory, name string) []any {
	n := f.Node(t, name)
	return []any{n.Labels[policy.LabelNodePool], n.Labels["team"], n.Spec.Taints}
}

var (
	in  = []any{"np1", "llm", []corev1.Taint{dedicated}}
	out = []any{"", "", []corev1.Taint(nil)}
)

func TestNodePool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		newCmd  func(kit.Factory, genericiooptions.IOStreams) *cobra.Command
		args    []string
		stdout  string
		node    string
		members []any
		events  []string
	}{
		{"add", add, []string{"np1", "n1", "n2", "--pool", "train-a100"},
			"node/n1 added to node pool np1\nnode/n2 added to node pool np1\n", "n2", in,
			[]string{"NodePool: node n1 added to node pool np1 (pool train-a100)", "NodePool: node n2 added to node pool np1 (pool train-a100)"}},
		{"add a member again: unchanged", add, []string{"np1", "n3", "--pool", "train-a100"},
			"node/n3 unchanged\n", "n3", in, nil},
		{"add, client dry run", add, []string{"np1", "n1", "--pool", "train-a100", "--dry-run=client"},
			"node/n1 added to node pool np1 (dry run)\n", "n1", out, nil},
		{"add, server dry run", add, []string{"np1", "n1", "--pool", "train-a100", "--dry-run=server"},
			"node/n1 added to node pool np1 (server dry run)\n", "n1", out, nil},
		{"add -o name", add, []string{"np1", "n1", "--pool", "train-a100", "-o", "name"},
			"node/n1\n", "n1", in, []string{"NodePool: node n1 added to node pool np1 (pool train-a100)"}},
		{"remove", remove, []string{"np1", "n3", "--pool", "train-a100"},
			"node/n3 removed from node pool np1\n", "n3", out, []string{"NodePool: node n3 removed from node pool np1 (pool train-a100)"}},
		{"remove, server dry run", remove, []string{"np1", "n3", "--pool", "train-a100", "--dry-run=server"},
			"node/n3 removed from node pool np1 (server dry run)\n", "n3", in, nil},
		{"remove -o name", remove, []string{"np1", "n3", "--pool", "train-a100", "-o", "name"},
			"node/n3\n", "n3", out, []string{"NodePool: node n3 removed from node pool np1 (pool train-a100)"}},
		{"apply: already in line", apply, []string{"np1", "--pool", "train-a100"},
			"node/n3 unchanged\n", "n3", in, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t)
			r := kittest.Run(f, tc.newCmd, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.stdout, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Equal(t, tc.members, member(t, f, tc.node))
			assert.Equal(t, "train-a100", f.Node(t, tc.node).Labels[policy.LabelPool], "the node stays in its pool")
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

// apply brings the members in line with the node pool as declared now.
func TestNodePoolApplyChangedLabels(t *testing.T) {
	f := cluster(t)
	p := f.Pool(t, "train-a100")
	p.Spec.NodePools[0].Labels["team"] = "infra"
	c, err := f.Clients()
	require.NoError(t, err)
	_, err = c.Pools.Update(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	r := kittest.Run(f, apply, "", "np1", "--pool", "train-a100")
	require.NoError(t, r.Err)
	assert.Equal(t, "node/n3 configured\n", r.Out)
	assert.Equal(t, []any{"np1", "infra", []corev1.Taint{dedicated}}, member(t, f, "n3"))
	assert.Equal(t, []string{"NodePool: node n3 configured (pool train-a100)"}, f.Events(t))
}

// Every node is checked before any changes: one bad node and nothing changes.
func TestNodePoolRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		newCmd func(kit.Factory, genericiooptions.IOStreams) *cobra.Command
		args   []string
		want   string
	}{
		{"not declared", add, []string{"np9", "n1", "--pool", "train-a100"},
			`node pool "np9" is not declared in pool "train-a100" (declared: np1, np2): add it to spec.nodePools with kubectl litepool edit pool train-a100`},
		{"every node checked first", add, []string{"np1", "n1", "n4", "no-such-node", "--pool", "train-a100"},
			"nothing was changed:\nnode \"n4\" is in pool \"default\", not in pool \"train-a100\": add it to the pool first (kubectl litepool scale train-a100 --add n4)\nnodes \"no-such-node\" not found"},
		{"in another node pool", add, []string{"np2", "n1", "n3", "--pool", "train-a100"},
			"nothing was changed:\nnode \"n3\" is in node pool \"np1\": take it out first (kubectl litepool nodepool remove np1 n3 --pool train-a100)"},
		{"not a member", remove, []string{"np1", "n1", "--pool", "train-a100"},
			"nothing was changed:\nnode \"n1\" is not in node pool \"np1\" (its node pool: <none>)"},
		{"a pool of labels declares none", add, []string{"np1", "g1", "--pool", "infer-a10"},
			`pool "infer-a10" has no Pool object, so no node pools are declared: create one with kubectl litepool create -f`},
		{"no such pool", apply, []string{"np1", "--pool", "no-such-pool"}, `pools.runwhere.ai "no-such-pool" not found`},
		{"the default pool", add, []string{"np1", "n4", "--pool", "default"}, `the default pool has no node pools: put the nodes into a pool first`},
		{"--pool is required", add, []string{"np1", "n1"}, `--pool is required: node pool names are unique only inside a pool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t)
			r := kittest.Run(f, tc.newCmd, "", tc.args...)
			require.EqualError(t, r.Err, tc.want)
			assert.Empty(t, r.Out)
			assert.Equal(t, out, member(t, f, "n1"))
			assert.Equal(t, in, member(t, f, "n3"))
			assert.Empty(t, f.Events(t))
		})
	}
}

// A write the API server refuses stops the command at that node: the nodes before it
// are done (and said), the ones after it untouched.
func TestNodePoolWriteFails(t *testing.T) {
	f := cluster(t)
	f.Kube.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetName() == "n2" {
			return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
		}
		return false, nil, nil
	})
	r := kittest.Run(f, add, "", "np1", "n1", "n2", "--pool", "train-a100")
	require.EqualError(t, r.Err, "Internal error occurred: connection lost")
	assert.Equal(t, "node/n1 added to node pool np1\n", r.Out)
	assert.Equal(t, in, member(t, f, "n1"))
	assert.Equal(t, out, member(t, f, "n2"))
	assert.Equal(t, []string{"NodePool: node n1 added to node pool np1 (pool train-a100)"}, f.Events(t))
}
