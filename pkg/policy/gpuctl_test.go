package policy

import (
	"testing"

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
			`not a valid gpuctl pool file: unknown field "gpus"; expected the fields kind, version, pool.name, pool.description, pool.nodes.<node>.gpu-type`},
		{"no name", "kind: pool\nversion: v0.1\npool: {description: x}\n", `gpuctl pool file: pool.name is missing`},
		{"bad name", "kind: pool\nversion: v0.1\npool: {name: Training_Pool}\n",
			`[R1] invalid pool name "Training_Pool": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`},
		{"no gpu-type", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes:\n    node-1: {}\n",
			"gpuctl pool file: pool \"train-pool\": node \"node-1\" has no gpu-type: write `gpu-type: <model>` under it (`gpu-type: \"\"` for a CPU node)"},
		{"both keys", "kind: pool\nversion: v0.1\npool:\n  name: train-pool\n  nodes:\n    node-1: {gpu-type: A100, gpuType: A10}\n",
			`gpuctl pool file: pool "train-pool": node "node-1" sets gpu-type "A100" and gpuType "A10": use one of them`},
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
