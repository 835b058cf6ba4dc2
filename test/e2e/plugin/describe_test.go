package plugin

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// beforeEvents cuts describe output at its Events section (ages differ run to run).
func beforeEvents(out string) string {
	if i := strings.Index(out, "Events:"); i >= 0 {
		return out[:i]
	}
	return out
}

func TestDescribePool(t *testing.T) {
	assert.Equal(t, `Name:             train-snt9b
Type:             Training
Description:      Ascend Snt9B training
Tags:             <none>
Workloads:        training, development
Min Nodes:        1
Exclusive:        false
Namespaces:       <all>
Software:         driver 24.1.rc2, cann 8.0.RC3
HCCL Op Retry:    enabled, max retries 3, timeout 300s
Accelerator:      Snt9B (huawei.com/Ascend910)
Status:           Degraded
Nodes:            3 (2 healthy, 1 faulty)
Accelerators:     24 total, 8 used, 8 free (8 idle on members out of service)
Driver Versions:  24.1.rc2
Node Pools:       <none>
Members:
  Name          Node Pool  Status    GPU Type  Total  Used  Free  Driver    Workload Pods
  ----          ---------  ------    --------  -----  ----  ----  ------    -------------
  snt9b-node-1  <none>     Running   Snt9B     8      8     0     24.1.rc2  1
  snt9b-node-2  <none>     Running   Snt9B     8      0     8     24.1.rc2  0
  snt9b-node-3  <none>     NotReady  Snt9B     8      0     8     24.1.rc2  0
`, beforeEvents(must(t, "describe", "pool", "train-snt9b")))

	assert.Equal(t, `Name:             infer-a10
Pool Object:      <none> (pool exists only as node labels; `+"`kubectl litepool create`"+` adopts it)
Accelerator:      A10-24G (nvidia.com/gpu)
Status:           Degraded
Nodes:            2 (1 healthy, 1 faulty)
Accelerators:     8 total, 2 used, 2 free (4 idle on members out of service)
Driver Versions:  550.54.15
Node Pools:       <none>
Members:
  Name        Node Pool  Status    GPU Type  Total  Used  Free  Driver     Workload Pods
  ----        ---------  ------    --------  -----  ----  ----  ------     -------------
  a10-node-1  <none>     Running   A10-24G   4      2     2     550.54.15  1
  a10-node-2  <none>     Cordoned  A10-24G   4      0     4     550.54.15  0
`, beforeEvents(must(t, "describe", "pool", "infer-a10")))

	out := must(t, "describe", "pool", "train-a100", "dev-sandbox")
	assert.Contains(t, out, `Node Pools:
  Name      Nodes  Labels  Taints
  ----      -----  ------  ------
  a100-np1  3      <none>  <none>
`)
	assert.Contains(t, out, "\n\nName:             dev-sandbox\nType:             Development\n")
	assert.Contains(t, out, "Status:           Empty\nNodes:            0 (0 healthy, 0 faulty)\n")
	assert.Contains(t, out, "Members:          <none>\n")

	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"no-such-pool\" not found\n", fails(t, "describe", "pool", "no-such-pool"))
}

func TestDescribeNode(t *testing.T) {
	assert.Equal(t, `Name:                  a100-node-1
Pool:                  train-a100
Node Pool:             a100-np1
Status:                Running
Ready:                 true
Unschedulable:         false
GPU Type:              A100-80G
Driver Version:        535.104.05
Accelerators:          nvidia.com/gpu: 8 total, 8 used, 0 free
Litepool Labels:       runwhere.ai/gpu-type=A100-80G
                       runwhere.ai/node-pool=a100-np1
                       runwhere.ai/pool=train-a100
Litepool Annotations:  <none>
Taints:                <none>
Pods:                  (1 non-terminated)
  Namespace  Name           Workload Type  Accelerators  Phase
  ---------  ----           -------------  ------------  -----
  ai-team    llama-train-0  training       8             Running
`, beforeEvents(must(t, "describe", "node", "a100-node-1")))
	out := must(t, "describe", "node", "snt9b-node-3")
	assert.Contains(t, out, "Status:                NotReady\nReady:                 false\n")
	assert.Contains(t, out, "Pods:                  <none>\n")
	assert.Equal(t, "Error from server (NotFound): nodes \"no-such-node\" not found\n", fails(t, "describe", "node", "no-such-node"))
}
