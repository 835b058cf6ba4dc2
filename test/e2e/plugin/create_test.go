package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// writeFiles writes name -> content into a temporary directory and returns the paths.
func writeFiles(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for name, content := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		out[name] = path
	}
	return out
}

const trainingPoolFile = `# gpuctl's format, as in its docs
kind: pool
version: v0.1
pool:
  name: training-pool
  description: "训练任务专用资源池"
  nodes:
    a100-node-4:   # 节点主机名
      gpu-type: A100-80G
`

const twoPoolsFile = `kind: pool
version: v0.1
pool:
  name: compute-pool
  description: "CPU 计算服务(无 GPU 节点)"
  nodes:
    cpu-node-1:
      gpu-type: ""
    cpu-node-2:
      gpuType: ""
---
apiVersion: runwhere.ai/v1alpha1
kind: Pool
metadata:
  name: infer-h100
spec:
  type: Inference
  description: vLLM serving
  accelerator: {type: H100-80G}
  minNodes: 1
`

func TestCreateFromGpuctlFilesAndPoolObjects(t *testing.T) {
	restoreAfter(t)
	clearEvents(t)
	f := writeFiles(t, map[string]string{"training-pool.yaml": trainingPoolFile, "pools.yaml": twoPoolsFile})
	before := snapshot(t)
	assert.Equal(t, `pool.runwhere.ai/training-pool created (server dry run)
node/a100-node-4 labeled (server dry run)
pool.runwhere.ai/compute-pool created (server dry run)
node/cpu-node-1 labeled (server dry run)
node/cpu-node-2 labeled (server dry run)
pool.runwhere.ai/infer-h100 created (server dry run)
`, must(t, "create", "-f", f["training-pool.yaml"], "-f", f["pools.yaml"], "--dry-run=server"))
	assertUnchanged(t, before)

	assert.Equal(t, `pool.runwhere.ai/training-pool created
node/a100-node-4 labeled
pool.runwhere.ai/compute-pool created
node/cpu-node-1 labeled
node/cpu-node-2 labeled
pool.runwhere.ai/infer-h100 created
`, must(t, "create", "-f", f["training-pool.yaml"], "-f", f["pools.yaml"]))
	assert.Equal(t, `POOL NAME       STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
compute-pool    Running    0           0          0          2
dev-sandbox     Empty      0           0          0          0
infer-a10       Degraded   8           2          2          2
infer-h100      Empty      0           0          0          0
train-a100      Running    24          12         12         3
train-snt9b     Degraded   24          8          8          3
training-pool   Running    8           0          8          1
default         Empty      0           0          0          0
`, must(t, "get", "pools"))
	assert.Equal(t, "compute-pool=Training/ infer-h100=Inference/H100-80G training-pool=Training/A100-80G ",
		must(t, "get", "pools", "compute-pool", "infer-h100", "training-pool", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.type}/{.spec.accelerator.type} {end}"))
	p, err := pools().Get(ctx(), "training-pool")
	require.NoError(t, err)
	assert.Equal(t, "训练任务专用资源池", p.Spec.Description)
	assert.Equal(t, v1alpha1.AcceleratorSpec{Type: "A100-80G"}, p.Spec.Accelerator)
	assert.Equal(t, "compute-pool", node(t, "cpu-node-2").Labels["runwhere.ai/pool"])
	assert.NotContains(t, node(t, "cpu-node-2").Labels, "runwhere.ai/gpu-type", "an empty gpu-type sets no label")
	assert.Equal(t, []string{"AddedToPool: node a100-node-4 added to pool training-pool (kubectl litepool create)"}, litepoolEvents(t, "a100-node-4"))

	// Creating again: the pools exist.
	assert.Equal(t, "error: nothing was created:\n"+f["training-pool.yaml"]+": pools.runwhere.ai \"training-pool\" already exists\n",
		fails(t, "create", "-f", f["training-pool.yaml"]))
}

func TestCreateLabelsNodesWithoutGPUTypeAndReadsStdin(t *testing.T) {
	restoreAfter(t)
	addKwokNode(t, "gpu-node-5", nil)
	r := run(t, "kind: pool\nversion: v0.1\npool:\n  name: dev-pool\n  nodes:\n    gpu-node-5:\n      gpu-type: RTX4090-24G\n", "create", "-f", "-")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "pool.runwhere.ai/dev-pool created\nnode/gpu-node-5 labeled\n", r.Stdout)
	n := node(t, "gpu-node-5")
	assert.Equal(t, []string{"dev-pool", "RTX4090-24G"}, []string{n.Labels["runwhere.ai/pool"], n.Labels["runwhere.ai/gpu-type"]})
}

func TestCreateAdoptsAPoolMadeOfLabels(t *testing.T) {
	restoreAfter(t)
	f := writeFiles(t, map[string]string{"infer-a10.yaml": `apiVersion: runwhere.ai/v1alpha1
kind: Pool
metadata: {name: infer-a10}
spec:
  type: Inference
  accelerator: {type: A10-24G}
  exclusive: true
`})
	assert.Equal(t, "pool.runwhere.ai/infer-a10 created\nnode/a10-node-1 tainted\nnode/a10-node-2 tainted\n", must(t, "create", "-f", f["infer-a10.yaml"]))
	assert.Equal(t, "infer-a10   Inference   A10-24G\n", columns(must(t, "get", "pools", "infer-a10", "-o", "wide", "--no-headers"), 0, 6, 7))
	assert.Equal(t, []any{"runwhere.ai/pool=infer-a10:NoSchedule"}, []any{node(t, "a10-node-1").Spec.Taints[0].ToString()})
}

func TestCreateRefusesBadFilesAndChangesNothing(t *testing.T) {
	restoreAfter(t)
	before := snapshot(t)
	f := writeFiles(t, map[string]string{
		"broken.yaml":    "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n   nodes: {}\n",
		"version.yaml":   "kind: pool\nversion: v1\npool:\n  name: train-pool\n",
		"unknown.yaml":   "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  gpus: 8\n",
		"list.yaml":      "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes: [a100-node-4]\n",
		"mixed.yaml":     "kind: pool\nversion: v0.1\npool:\n  name: mixed-pool\n  nodes:\n    a100-node-4: {gpu-type: A100-80G}\n    a10-node-1: {gpu-type: A10-24G}\n",
		"name.yaml":      "kind: pool\nversion: v0.1\npool:\n  name: Train_Pool\n",
		"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"pool-typo.yaml": "apiVersion: runwhere.ai/v1alpha1\nkind: Pool\nmetadata: {name: typo-pool}\nspec: {minNode: 2}\n",
		"pool-bad.yaml":  "apiVersion: runwhere.ai/v1alpha1\nkind: Pool\nmetadata: {name: bad-pool}\nspec: {type: Batch, minNodes: 1, hccl: {opRetry: {maxRetries: 11}}}\n",
		"nodes.yaml": `kind: pool
version: v0.1
pool:
  name: train-pool
  nodes:
    a10-node-1: {gpu-type: H100-80G}
    a100-node-4: {gpu-type: H100-80G}
    no-such-node: {gpu-type: H100-80G}
`,
		// One good document does not go in alone when another is bad.
		"half.yaml": trainingPoolFile + "---\nkind: pool\nversion: v0.1\npool:\n  name: second-pool\n  nodes:\n    a100-node-4: {gpu-type: A100-80G}\n",
	})
	tests := []struct{ file, want string }{
		{"broken.yaml", "error: " + f["broken.yaml"] + ": not valid YAML: yaml: line 5: mapping values are not allowed in this context"},
		{"version.yaml", "error: " + f["version.yaml"] + ": gpuctl pool file: version \"v1\" is not supported: must be \"v0.1\""},
		{"unknown.yaml", "error: " + f["unknown.yaml"] + ": not a valid gpuctl pool file: unknown field \"gpus\"; expected the fields kind (pool or resource), version, pool.name, pool.description, nodes.<node>.gpu-type (nodes at the top level or under pool; gpu-type, gpuType or gpu_type)"},
		{"list.yaml", "error: " + f["list.yaml"] + ": not a valid gpuctl pool file: field pool.nodes must be a mapping, not a list; expected the fields kind (pool or resource), version, pool.name, pool.description, nodes.<node>.gpu-type (nodes at the top level or under pool; gpu-type, gpuType or gpu_type)"},
		{"mixed.yaml", "error: " + f["mixed.yaml"] + ": [N2] gpuctl pool file: pool \"mixed-pool\" lists nodes of different gpu-types (A10-24G on a10-node-1; A100-80G on a100-node-4): a pool holds one accelerator model; split them into one pool per gpu-type"},
		{"name.yaml", "error: " + f["name.yaml"] + ": [R1] invalid pool name \"Train_Pool\": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)"},
		{"configmap.yaml", "error: " + f["configmap.yaml"] + ": unsupported document (apiVersion \"v1\", kind \"ConfigMap\"): create -f takes Pool objects (apiVersion: runwhere.ai/v1alpha1, kind: Pool), gpuctl pool files (kind: pool, version: v0.1) and gpuctl quota files (kind: quota)"},
		{"pool-typo.yaml", "error: " + f["pool-typo.yaml"] + ": not a valid Pool: unknown field \"minNode\""},
		{"pool-bad.yaml", "error: nothing was created:\n" + f["pool-bad.yaml"] + ": [R1] unknown pool type \"Batch\": must be one of Training, Inference, Development, Compute\n" + f["pool-bad.yaml"] + ": [R1] hccl max retries 11 out of range: must be 1-10"},
		{"nodes.yaml", "error: nothing was created:\n" +
			f["nodes.yaml"] + ": [S1] node \"a10-node-1\" belongs to pool \"infer-a10\": remove it from \"infer-a10\" first (kubectl litepool scale infer-a10 --remove a10-node-1)\n" +
			f["nodes.yaml"] + ": [N2] node \"a100-node-4\" is labelled runwhere.ai/gpu-type=A100-80G but the pool file declares gpu-type \"H100-80G\" for it\n" +
			f["nodes.yaml"] + ": node \"no-such-node\" listed in pool \"train-pool\" not found"},
		{"half.yaml", "error: nothing was created:\n" + f["half.yaml"] + ": document 2: node \"a100-node-4\" is also listed in " + f["half.yaml"] + ": document 1: a node belongs to one pool"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			assert.Equal(t, tt.want+"\n", fails(t, "create", "-f", f[tt.file]))
		})
	}
	assert.Equal(t, "error: the path \"/no/such/file.yaml\" does not exist\n", fails(t, "create", "-f", "/no/such/file.yaml"))
	assert.Equal(t, "error: must specify one of -f: kubectl litepool create -f FILE\n", fails(t, "create"))
	assertUnchanged(t, before)
}
