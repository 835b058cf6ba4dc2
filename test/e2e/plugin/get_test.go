package plugin

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

const fixtureNodes = `NAME           POOL          NODE POOL   STATUS     GPU TYPE   GPU TOTAL   GPU USED   GPU FREE
a10-node-1     infer-a10     <none>      Running    A10-24G    4           2          2
a10-node-2     infer-a10     <none>      Cordoned   A10-24G    4           0          4
a100-node-1    train-a100    a100-np1    Running    A100-80G   8           8          0
a100-node-2    train-a100    a100-np1    Running    A100-80G   8           4          4
a100-node-3    train-a100    a100-np1    Running    A100-80G   8           0          8
a100-node-4    default       <none>      Running    A100-80G   8           0          8
cpu-node-1     default       <none>      Running    <none>     0           0          0
cpu-node-2     default       <none>      Running    <none>     0           0          0
snt9b-node-1   train-snt9b   <none>      Running    Snt9B      8           8          0
snt9b-node-2   train-snt9b   <none>      Running    Snt9B      8           0          8
snt9b-node-3   train-snt9b   <none>      NotReady   Snt9B      8           0          8
`

func TestGetNodes(t *testing.T) {
	assert.Equal(t, fixtureNodes, must(t, "get", "nodes"))
	assert.Equal(t, `NAME          POOL         NODE POOL   STATUS    GPU TYPE   GPU TOTAL   GPU USED   GPU FREE   RESOURCE         DRIVER VERSION   WORKLOAD PODS
a100-node-1   train-a100   a100-np1    Running   A100-80G   8           8          0          nvidia.com/gpu   535.104.05       1
a100-node-2   train-a100   a100-np1    Running   A100-80G   8           4          4          nvidia.com/gpu   535.104.05       1
a100-node-3   train-a100   a100-np1    Running   A100-80G   8           0          8          nvidia.com/gpu   535.104.05       0
`, must(t, "get", "nodes", "--pool", "train-a100", "-o", "wide"))
	assert.Equal(t, `a100-node-4   default   <none>   Running   A100-80G   8     0     8
cpu-node-1    default   <none>   Running   <none>     0     0     0
cpu-node-2    default   <none>   Running   <none>     0     0     0
`, must(t, "get", "nodes", "--pool", "default", "--no-headers"))
	assert.Equal(t, `NAME           POOL          NODE POOL   STATUS     GPU TYPE   GPU TOTAL   GPU USED   GPU FREE
a100-node-3    train-a100    a100-np1    Running    A100-80G   8           0          8
snt9b-node-2   train-snt9b   <none>      Running    Snt9B      8           0          8
a10-node-2     infer-a10     <none>      Cordoned   A10-24G    4           0          4
`, must(t, "get", "nodes", "snt9b-node-2", "a100-node-3", "a10-node-2", "--sort-by=gpu-free"))
	assert.Equal(t, "node/a100-node-1\nnode/a100-node-2\nnode/a100-node-3\n", must(t, "get", "nodes", "--pool", "train-a100", "-o", "name"))
	assert.Equal(t, "A100-80G", must(t, "get", "node", "a100-node-4", "-o", "jsonpath={.metadata.labels.runwhere\\.ai/gpu-type}"))
	// A pool with a Pool object and no nodes lists nothing; an unknown pool is an error.
	r := run(t, "", "get", "nodes", "--pool", "dev-sandbox")
	assert.Equal(t, []string{"", "No resources found\n"}, []string{r.Stdout, r.Stderr})
	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"no-such-pool\" not found\n", fails(t, "get", "nodes", "--pool", "no-such-pool"))
	assert.Equal(t, "Error from server (NotFound): nodes \"no-such-node\" not found\n", fails(t, "get", "nodes", "no-such-node"))
	assert.Equal(t, "error: invalid --sort-by \"gpu\": must be one of [name pool status gpu-total gpu-used gpu-free]\n", fails(t, "get", "nodes", "--sort-by", "gpu"))
}

func TestGetNodeStatusModel(t *testing.T) {
	restoreAfter(t)
	kube := framework().Kube
	n := node(t, "snt9b-node-2")
	n.Annotations["runwhere.ai/upgrade-state"] = "install"
	_, err := kube.CoreV1().Nodes().Update(ctx(), n, metaUpdate)
	require.NoError(t, err)
	n = node(t, "a100-node-3")
	n.Labels["runwhere.ai/health"] = "degraded"
	_, err = kube.CoreV1().Nodes().Update(ctx(), n, metaUpdate)
	require.NoError(t, err)
	n = node(t, "cpu-node-1")
	n.Annotations["runwhere.ai/draining"] = "true"
	_, err = kube.CoreV1().Nodes().Update(ctx(), n, metaUpdate)
	require.NoError(t, err)
	assert.Equal(t, `NAME           STATUS
a10-node-1     Running
a10-node-2     Cordoned
a100-node-1    Running
a100-node-2    Running
a100-node-3    Degraded
a100-node-4    Running
cpu-node-1     Draining
cpu-node-2     Running
snt9b-node-1   Running
snt9b-node-2   Upgrading
snt9b-node-3   NotReady
`, columns(must(t, "get", "nodes"), 0, 3))
	// Every member in the total; none free: snt9b-node-1 is full, node-2 mid-upgrade, node-3 NotReady.
	assert.Equal(t, "train-snt9b   Upgrading   24    8     0     3\n", must(t, "get", "pools", "train-snt9b", "--no-headers"))
}

func TestGetPoolsFormatsAndSorting(t *testing.T) {
	assert.Equal(t, `POOL NAME     STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
train-a100    Running    24          12         12         3
train-snt9b   Degraded   24          8          8          3
default       Running    8           0          8          3
infer-a10     Degraded   8           2          2          2
dev-sandbox   Empty      0           0          0          0
`, must(t, "get", "pools", "--sort-by=gpu-free"))
	assert.Equal(t, "pool.runwhere.ai/dev-sandbox\npool.runwhere.ai/infer-a10\npool.runwhere.ai/train-a100\npool.runwhere.ai/train-snt9b\npool.runwhere.ai/default\n",
		must(t, "get", "pools", "-o", "name"))
	assert.Equal(t, "dev-sandbox:0 infer-a10:2 train-a100:12 train-snt9b:8 default:8 ",
		must(t, "get", "pools", "-o", "jsonpath={range .items[*]}{.metadata.name}:{.status.acceleratorFree} {end}"))
	var p v1alpha1.Pool
	require.NoError(t, yaml.Unmarshal([]byte(must(t, "get", "pool", "train-a100", "-o", "yaml")), &p))
	assert.Equal(t, "A100-80G", p.Spec.Accelerator.Type)
	assert.Equal(t, int32(2), p.Spec.MinNodes)
	assert.Equal(t, v1alpha1.PoolStatus{Phase: "Running", NodeCount: 3, NodeStates: map[string]int32{"Running": 3}, HealthyNodes: 3, AcceleratorResource: "nvidia.com/gpu",
		AcceleratorTotal: 24, AcceleratorUsed: 12, AcceleratorFree: 12, GPUTypes: []string{"A100-80G"}, DriverVersions: []string{"535.104.05"}}, p.Status)
	assert.Equal(t, "error: invalid --sort-by \"free\": must be one of [name gpu-total gpu-used gpu-free nodes]\n", fails(t, "get", "pools", "--sort-by", "free"))
}

func TestGetNodePools(t *testing.T) {
	assert.Equal(t, `POOL         NODE POOL   STATUS    NODES   GPU TOTAL   GPU USED   GPU FREE   LABELS   TAINTS
train-a100   a100-np1    Running   3       24          12         12         <none>   <none>
`, must(t, "get", "nodepools", "-o", "wide"))
	assert.Equal(t, "nodepool.runwhere.ai/a100-np1\n", must(t, "get", "nodepools", "--pool", "train-a100", "-o", "name"))
	assert.Equal(t, "a100-node-1 a100-node-2 a100-node-3", must(t, "get", "nodepool", "a100-np1", "-o", "jsonpath={.status.nodes[*]}"))
	r := run(t, "", "get", "nodepools", "--pool", "train-snt9b")
	assert.Equal(t, []string{"", "No resources found\n"}, []string{r.Stdout, r.Stderr})
	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"no-such-pool\" not found\n", fails(t, "get", "nodepools", "--pool", "no-such-pool"))
	assert.Equal(t, "error: node pool \"np9\" not found\n", fails(t, "get", "nodepools", "np9"))
}

func TestGetLabels(t *testing.T) {
	assert.Equal(t, `NODE          KEY                     VALUE
a100-node-1   runwhere.ai/gpu-type    A100-80G
a100-node-1   runwhere.ai/node-pool   a100-np1
a100-node-1   runwhere.ai/pool        train-a100
a10-node-1    runwhere.ai/gpu-type    A10-24G
a10-node-1    runwhere.ai/pool        infer-a10
`, must(t, "get", "labels", "a100-node-1", "a10-node-1"))
	assert.Equal(t, "NODE          KEY                VALUE\na100-node-1   runwhere.ai/pool   train-a100\n",
		must(t, "get", "labels", "a100-node-1", "--key=runwhere.ai/pool"))
	assert.Equal(t, `cpu-node-1   beta.kubernetes.io/arch   amd64
cpu-node-1   beta.kubernetes.io/os     linux
cpu-node-1   kubernetes.io/arch        amd64
cpu-node-1   kubernetes.io/hostname    cpu-node-1
cpu-node-1   kubernetes.io/os          linux
cpu-node-1   type                      kwok
`, must(t, "get", "labels", "cpu-node-1", "--all", "--no-headers"))
	// gpuctl's habit of short keys gets the right key, never a doubled prefix.
	assert.Equal(t, "error: [N1] label key \"pool\" has no \"runwhere.ai/\" prefix: did you mean \"runwhere.ai/pool\"?\n",
		fails(t, "get", "labels", "a100-node-1", "--key=pool"))
	assert.Equal(t, "error: node \"a100-node-4\" has no label \"runwhere.ai/pool\"\n", fails(t, "get", "labels", "a100-node-4", "--key=runwhere.ai/pool"))
	assert.Equal(t, "Error from server (NotFound): nodes \"no-such-node\" not found\n", fails(t, "get", "labels", "no-such-node"))
	r := run(t, "", "get", "labels", "cpu-node-1")
	assert.Equal(t, []string{"", "No litepool labels found (--all shows every label)\n"}, []string{r.Stdout, r.Stderr})
}

// columns keeps the given columns (by index) of a table, re-aligned to the widest cell.
func columns(table string, idx ...int) string {
	var rows [][]string
	width := map[int]int{}
	for _, line := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
		line = strings.NewReplacer("GPU ", "GPU_", "NODE POOL", "NODE_POOL").Replace(line)
		f := strings.Fields(line)
		var row []string
		for j, i := range idx {
			cell := strings.NewReplacer("GPU_", "GPU ", "NODE_POOL", "NODE POOL").Replace(f[i])
			row = append(row, cell)
			width[j] = max(width[j], len(cell))
		}
		rows = append(rows, row)
	}
	var b strings.Builder
	for _, row := range rows {
		for j, cell := range row {
			if j == len(row)-1 {
				b.WriteString(cell)
			} else {
				b.WriteString(cell + strings.Repeat(" ", width[j]-len(cell)+3))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
