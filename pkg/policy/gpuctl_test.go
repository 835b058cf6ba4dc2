package policy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseGpuctlPool(t *testing.T) {
	got, err := ParseGpuctlPool([]byte(`
kind: pool
version: v0.1
pool:
  name: training-pool
  description: "LLM training"
  nodes:
    node-2:
      gpuType: A100-100G
    node-1:
      gpu-type: A100-100G
`))
	require.NoError(t, err)
	assert.Equal(t, "training-pool", got.Pool.Name)
	assert.Equal(t, "LLM training", got.Pool.Spec.Description)
	assert.Equal(t, "A100-100G", got.Pool.Spec.Accelerator.Type)
	assert.Equal(t, []GpuctlNode{{"node-1", "A100-100G"}, {"node-2", "A100-100G"}}, got.Nodes)

	cpu, err := ParseGpuctlPool([]byte("kind: pool\nversion: v0.1\npool:\n  name: compute-pool\n  nodes:\n    cpu-node-1:\n      gpu-type: \"\"\n"))
	require.NoError(t, err)
	assert.Equal(t, "", cpu.Pool.Spec.Accelerator.Type)
	assert.Equal(t, []GpuctlNode{{"cpu-node-1", ""}}, cpu.Nodes)
}

func TestParseGpuctlPoolErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"version", "kind: pool\nversion: v1\npool: {name: train-pool}\n",
			`gpuctl pool file: version "v1" is not supported: must be "v0.1"`},
		{"unknown field", "kind: pool\nversion: v0.1\npool: {name: train-pool, gpus: 8}\n",
			`not a valid gpuctl pool file: unknown field "gpus"; expected the fields kind (pool or resource), version, pool.name, pool.description, nodes.<node>.gpu-type (nodes at the top level or under pool; gpu-type, gpuType or gpu_type)`},
		{"no name", "kind: pool\nversion: v0.1\npool: {description: x}\n", `gpuctl pool file: pool.name is missing`},
		{"bad name", "kind: pool\nversion: v0.1\npool: {name: Training_Pool}\n",
			`[R1] invalid pool name "Training_Pool": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`},
		{"no gpu-type", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes:\n    node-1: {}\n",
			"gpuctl pool file: pool \"train-pool\": node \"node-1\" has no gpu-type: write `gpu-type: <model>` under it (`gpu-type: \"\"` for a CPU node)"},
		{"both keys", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes:\n    node-1: {gpu-type: A100, gpuType: A10}\n",
			`gpuctl pool file: pool "train-pool": node "node-1" sets gpu-type "A100" and gpuType "A10": use one of them`},
		{"three keys", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\nnodes:\n  node-1: {gpu-type: A100, gpuType: A100, gpu_type: A10}\n",
			`gpuctl pool file: pool "train-pool": node "node-1" sets gpu-type "A100" and gpu_type "A10": use one of them`},
		{"nodes twice", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes: {node-1: {gpuType: A100}}\nnodes:\n  node-2: {gpuType: A100}\n",
			`gpuctl pool file: pool "train-pool" lists nodes both at the top level and under pool: keep one list`},
		{"kind", "kind: Pool\nversion: v0.1\npool: {name: train-pool}\n", `gpuctl pool file: kind "Pool": must be "pool" or "resource"`},
		{"mixed", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes:\n    n1: {gpu-type: A100}\n    n2: {gpu-type: A10}\n    n3: {gpu-type: A100}\n",
			`[N2] gpuctl pool file: pool "train-pool" lists nodes of different gpu-types (A10 on n2; A100 on n1, n3): a pool holds one accelerator model; split them into one pool per gpu-type`},
		{"bad gpu-type", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes:\n    n1: {gpu-type: 'A100 80G'}\n",
			`gpuctl pool file: pool "train-pool": node "n1": [N1] invalid value "A100 80G" for label "runwhere.ai/gpu-type": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseGpuctlPool([]byte(tt.doc))
			assert.EqualError(t, err, tt.want)
		})
	}
}

// Every shape gpuctl reads: kind pool or resource; nodes nested (its guide) or at the top
// level (gpuctl/api/pool.py); gpuType (its alias), gpu_type (its field name) or gpu-type
// (its guide); version optional (gpuctl defaults it).
func TestParseGpuctlPoolShapes(t *testing.T) {
	want := []GpuctlNode{{"node-1", "A100-80G"}, {"node-2", "A100-80G"}}
	for name, doc := range map[string]string{
		"guide: nested, gpu-type":  "kind: pool\nversion: v0.1\npool:\n  name: training-pool\n  description: LLM\n  nodes:\n    node-1: {gpu-type: A100-80G}\n    node-2: {gpu-type: A100-80G}\n",
		"code: top-level, gpuType": "kind: pool\nversion: v0.1\npool:\n  name: training-pool\n  description: LLM\nnodes:\n  node-1:\n    gpuType: A100-80G\n  node-2:\n    gpuType: A100-80G\n",
		"kind resource, gpu_type":  "kind: resource\nversion: v0.1\npool: {name: training-pool, description: LLM}\nnodes:\n  node-1: {gpu_type: A100-80G}\n  node-2: {gpu_type: A100-80G}\n",
		"no version, mixed keys":   "kind: pool\npool: {name: training-pool, description: LLM}\nnodes:\n  node-1: {gpu_type: A100-80G, gpuType: A100-80G}\n  node-2: {gpu-type: A100-80G}\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGpuctlPool([]byte(doc))
			require.NoError(t, err)
			assert.Equal(t, want, got.Nodes)
			assert.Equal(t, "training-pool", got.Pool.Name)
			assert.Equal(t, "LLM", got.Pool.Spec.Description)
			assert.Equal(t, "A100-80G", got.Pool.Spec.Accelerator.Type)
		})
	}
	assert.True(t, IsGpuctlDocument("resource", ""))
	assert.False(t, IsGpuctlDocument("Pool", ""))
	assert.False(t, IsGpuctlDocument("pool", "runwhere.ai/v1alpha1"))
}

func TestCheckDeclaredGPUType(t *testing.T) {
	node := func(kv ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{}}}
		for i := 0; i < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
		return n
	}
	a100 := node(LabelNVIDIAProduct, "NVIDIA-A100-SXM4-80GB")
	a10 := node(LabelNVIDIAProduct, "NVIDIA-A10")
	rtx := node(LabelNVIDIAProduct, "NVIDIA-GeForce-RTX-4090")
	ascend := node(LabelNPUChipName, "910B3", LabelAscendFamily, "huawei-Ascend910")
	ascendAccOnly := node(LabelAscendFamily, "huawei-Ascend310P")
	ok := []struct {
		node     *corev1.Node
		declared string
	}{
		{a100, "A100-80G"}, {a100, "a100-80g"}, {a100, "A100"}, {a10, "A10-24G"}, {rtx, "RTX4090-24G"},
		{ascend, "Snt9B"}, {ascend, "Ascend910B"}, {ascend, "910B3"}, {ascendAccOnly, "Ascend310P"},
		{node(), "anything"}, {a100, ""},
	}
	for _, c := range ok {
		assert.NoError(t, CheckDeclaredGPUType(c.node, c.declared), "%s on %v", c.declared, c.node.Labels)
	}
	bad := []struct {
		node           *corev1.Node
		declared, want string
	}{
		{a100, "A10-24G", `[N2] node "n1": the pool file declares gpu-type "A10-24G" but its device plugin reports nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB: declare the model the node has, or leave the node out`},
		{a100, "A100-40G", `[N2] node "n1": the pool file declares gpu-type "A100-40G" but its device plugin reports nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB: declare the model the node has, or leave the node out`},
		{a10, "A100-80G", `[N2] node "n1": the pool file declares gpu-type "A100-80G" but its device plugin reports nvidia.com/gpu.product=NVIDIA-A10: declare the model the node has, or leave the node out`},
		{a100, "Snt9B", `[N2] node "n1": the pool file declares gpu-type "Snt9B" but its device plugin reports nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB: declare the model the node has, or leave the node out`},
		{ascend, "A100-80G", `[N2] node "n1": the pool file declares gpu-type "A100-80G" but its device plugin reports node.kubernetes.io/npu.chip.name=910B3 (Ascend 910): declare an Ascend 910 type (e.g. Snt9, Ascend910), or leave the node out`},
		{ascendAccOnly, "Snt9B", `[N2] node "n1": the pool file declares gpu-type "Snt9B" but its device plugin reports accelerator=huawei-Ascend310P (Ascend 310): declare an Ascend 310 type (e.g. Snt3, Ascend310), or leave the node out`},
	}
	for _, c := range bad {
		assert.EqualError(t, CheckDeclaredGPUType(c.node, c.declared), c.want)
	}
}

func TestParseGpuctlQuota(t *testing.T) {
	got, err := ParseGpuctlQuota([]byte(`kind: quota
version: v0.1
quota:
  name: team-quota
  description: per-team limits
namespace:
  team-b:
    cpu: "8000m"
    memory: 32Gi
  team-a:
    cpu: 16
    memory: 64Gi
    gpu: 4
default:
  gpu: 1
`), "nvidia.com/gpu")
	require.NoError(t, err)
	require.Len(t, got, 3)
	var summary []string
	for _, rq := range got {
		var hard []string
		for _, k := range slices.Sorted(maps.Keys(rq.Spec.Hard)) {
			q := rq.Spec.Hard[k]
			hard = append(hard, string(k)+"="+q.String())
		}
		summary = append(summary, rq.Namespace+"/"+rq.Name+" "+strings.Join(hard, ","))
		assert.Equal(t, map[string]string{LabelQuota: "team-quota", LabelNamespace: rq.Namespace}, rq.Labels)
		assert.Equal(t, "per-team limits", rq.Annotations[AnnotationDescription])
	}
	assert.Equal(t, []string{
		"default/team-quota-default requests.nvidia.com/gpu=1",
		"team-a/team-quota-team-a requests.cpu=16,requests.memory=64Gi,requests.nvidia.com/gpu=4",
		"team-b/team-quota-team-b requests.cpu=8,requests.memory=32Gi",
	}, summary)

	npu, err := ParseGpuctlQuota([]byte("kind: quota\nquota: {name: npu}\nnamespace:\n  team-a: {gpu: 8}\n"), "huawei.com/Ascend910")
	require.NoError(t, err)
	assert.Contains(t, npu[0].Spec.Hard, corev1.ResourceName("requests.huawei.com/Ascend910"))
}

func TestParseGpuctlQuotaErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"no name", "kind: quota\nnamespace: {team-a: {gpu: 1}}\n", "gpuctl quota file: quota.name is missing"},
		{"no namespace", "kind: quota\nquota: {name: q1}\n", "gpuctl quota file: quota \"q1\" names no namespace: list them under namespace: (namespace: {team-a: {cpu: 8, memory: 32Gi, gpu: 2}})"},
		{"unknown field", "kind: quota\nquota: {name: q1}\nnamespace: {team-a: {gpus: 1}}\n",
			`not a valid gpuctl quota file: unknown field "gpus"; expected the fields kind, version, quota.name, quota.description, namespace.<namespace>.{cpu,memory,gpu}, default.{cpu,memory,gpu}`},
		{"bad quantity", "kind: quota\nquota: {name: q1}\nnamespace: {team-a: {memory: lots}}\n",
			`gpuctl quota file: quota "q1", namespace "team-a": memory "lots" is not a non-negative quantity (e.g. cpu: 8 or 8000m, memory: 32Gi, gpu: 4)`},
		{"fractional gpu", "kind: quota\nquota: {name: q1}\nnamespace: {team-a: {gpu: \"0.5\"}}\n",
			`gpuctl quota file: quota "q1", namespace "team-a": gpu "0.5" must be a whole number of devices`},
		{"default under namespace", "kind: quota\nquota: {name: q1}\nnamespace: {default: {gpu: 1}}\n",
			`gpuctl quota file: quota "q1": the namespace "default" takes the top-level default: entry, not namespace.default`},
		{"empty", "kind: quota\nquota: {name: q1}\nnamespace: {team-a: {}}\n",
			`gpuctl quota file: quota "q1", namespace "team-a": sets no limit: give cpu, memory or gpu`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseGpuctlQuota([]byte(tt.doc), "nvidia.com/gpu")
			assert.EqualError(t, err, tt.want)
		})
	}
}
