package get

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func printTable(t *testing.T, wide bool, table *metav1.Table) string {
	t.Helper()
	o := kit.NewPrintOptions()
	if wide {
		*o.Flags.OutputFormat = "wide"
	}
	var buf bytes.Buffer
	require.NoError(t, kit.PrintTable(o, &buf, table))
	return buf.String()
}

func nodesOf(inv *inventory.Inventory) []inventory.Node {
	out := make([]inventory.Node, len(inv.Nodes))
	for i, n := range inv.Nodes {
		out[i] = *n
	}
	return out
}

func TestNodeTable(t *testing.T) {
	nodes := nodesOf(fixtures.Sample())
	assert.Equal(t, `NAME   POOL         NODE POOL   STATUS     GPU TYPE   GPU TOTAL   GPU USED   GPU FREE
cpu    default      <none>      Running    <none>     0           0          0
n1     train-a100   np1         Running    A100-80G   8           8          0
n2     train-a100   np1         Cordoned   A100-80G   8           2          6
n3     train-a100   <none>      NotReady   A100-80G   8           0          8
`, printTable(t, false, NodeTable(nodes)))
	sortNodes(nodes, "gpu-free")
	assert.Equal(t, `NAME   POOL         NODE POOL   STATUS     GPU TYPE   GPU TOTAL   GPU USED   GPU FREE   RESOURCE         DRIVER VERSION   WORKLOAD PODS
n3     train-a100   <none>      NotReady   A100-80G   8           0          8          nvidia.com/gpu   535.104.05       0
n2     train-a100   np1         Cordoned   A100-80G   8           2          6          nvidia.com/gpu   535.104.05       1
cpu    default      <none>      Running    <none>     0           0          0          <none>           <none>           0
n1     train-a100   np1         Running    A100-80G   8           8          0          nvidia.com/gpu   535.104.05       1
`, printTable(t, true, NodeTable(nodes)))
	sortNodes(nodes, "status")
	assert.Equal(t, []string{"n2", "n3", "cpu", "n1"}, []string{nodes[0].Name, nodes[1].Name, nodes[2].Name, nodes[3].Name})
}

func TestNodePoolTable(t *testing.T) {
	inv := fixtures.Sample()
	pools := []v1alpha1.Pool{{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{NodePools: []v1alpha1.NodePool{
		{Name: "np1", Labels: map[string]string{"team": "llm", policy.LabelWorkloadType: "training"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "np-empty"},
	}}}}
	inv.Nodes[3].NodePool = "orphan" // n3: a node-pool label no pool declares
	rows := kit.NodePoolRows(pools, inv.Nodes)
	assert.Equal(t, `POOL         NODE POOL   STATUS     NODES   GPU TOTAL   GPU USED   GPU FREE   LABELS                                        TAINTS
train-a100   np-empty    Empty      0       0           0          0          <none>                                        <none>
train-a100   np1         Degraded   2       16          10         6          runwhere.ai/workload-type=training,team=llm   dedicated=llm:NoSchedule
train-a100   orphan      Degraded   1       0           0          0          <labels only>                                 <labels only>
`, printTable(t, true, NodePoolTable(rows)))
	view := nodePoolView(&rows[1])
	assert.Equal(t, "NodePool", view.GetKind())
	nodes, _, _ := unstructured.NestedStringSlice(view.Object, "status", "nodes")
	assert.Equal(t, []string{"n1", "n2"}, nodes)
}

func TestLabelTable(t *testing.T) {
	assert.Equal(t, `NODE   KEY                VALUE
n1     runwhere.ai/pool   train-a100
n1     team               llm
`, printTable(t, false, LabelTable([]LabelRow{{"n1", "runwhere.ai/pool", "train-a100"}, {"n1", "team", "llm"}})))
}
