package plugin

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func withAllocatable(n *corev1.Node, kv ...string) *corev1.Node {
	if n.Status.Allocatable == nil {
		n.Status.Allocatable = corev1.ResourceList{}
	}
	for i := 0; i < len(kv); i += 2 {
		n.Status.Allocatable[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return n
}

func requesting(p *corev1.Pod, kv ...string) *corev1.Pod {
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		p.Spec.Containers[0].Resources.Limits[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return p
}

// migSample: mig-a has 4 whole GPUs and two MIG profiles (NVIDIA's mixed strategy);
// mig-b is fully partitioned (nvidia.com/gpu: 0, seven 1g.10gb slices).
func migSample() *inventory.Inventory {
	b := inventory.NewBuilder()
	b.AddPod(testPod("ai", "whole", "mig-a", "2", map[string]string{policy.LabelWorkloadType: "training"}))
	b.AddPod(requesting(testPod("ai", "slices", "mig-a", "0", nil), "nvidia.com/mig-1g.10gb", "3"))
	// An init container takes 2 GPUs, the app a 3g.40gb slice: counted per resource, as
	// kubectl does (2 GPUs and 1 slice), never max(2, 1) of a mixed sum.
	initPod := requesting(testPod("ai", "with-init", "mig-a", "0", nil), "nvidia.com/mig-3g.40gb", "1")
	initPod.Spec.InitContainers = []corev1.Container{{Name: "warmup", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}
	b.AddPod(initPod)
	b.AddPod(requesting(testPod("ai", "on-b", "mig-b", "0", nil), "nvidia.com/mig-1g.10gb", "7"))
	b.AddNode(withAllocatable(testNode("mig-a", "train-a100", "", "A100-80G", 4, true),
		"nvidia.com/mig-1g.10gb", "14", "nvidia.com/mig-3g.40gb", "2"))
	b.AddNode(withAllocatable(testNode("mig-b", "train-a100", "", "A100-80G", 0, true),
		"nvidia.com/gpu", "0", "nvidia.com/mig-1g.10gb", "7"))
	return b.Build()
}

func TestMIGNodeTable(t *testing.T) {
	nodes := nodesOf(migSample())
	assert.Equal(t, `NAME    POOL         NODE POOL   STATUS    GPU TYPE   GPU TOTAL   GPU USED   GPU FREE
mig-a   train-a100   <none>      Running   A100-80G   4           4          0
mig-b   train-a100   <none>      Running   A100-80G   0           0          0
`, printTable(t, false, NodeTable(nodes)))
	assert.Equal(t, `NAME    POOL         NODE POOL   STATUS    GPU TYPE   GPU TOTAL   GPU USED   GPU FREE   RESOURCE         DRIVER VERSION   WORKLOAD PODS   MIG USED/TOTAL
mig-a   train-a100   <none>      Running   A100-80G   4           4          0          nvidia.com/gpu   535.104.05       3               mig-1g.10gb=3/14,mig-3g.40gb=1/2
mig-b   train-a100   <none>      Running   A100-80G   0           0          0          nvidia.com/gpu   <none>           1               mig-1g.10gb=7/7
`, printTable(t, true, NodeTable(nodes)))
}

func TestMIGPoolTable(t *testing.T) {
	pools := kit.MergePools(nil, migSample())
	assert.Equal(t, `POOL NAME    STATUS    GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
train-a100   Running   4           4          0          2
default      Empty     0           0          0          0
`, printPools(t, "", false, pools))
	assert.Equal(t, `POOL NAME    STATUS    GPU TOTAL   GPU USED   GPU FREE   NODE COUNT   TYPE               ACCELERATOR   RESOURCE         HEALTHY   FAULTY   DRIVER VERSIONS   MIG USED/TOTAL
train-a100   Running   4           4          0          2            <no pool object>   A100-80G      nvidia.com/gpu   2         0        535.104.05        mig-1g.10gb=10/21,mig-3g.40gb=1/2
default      Empty     0           0          0          0            <no pool object>   <none>        <none>           0         0        <none>            <none>
`, printPools(t, "wide", false, pools))
}

func TestMIGDescribeLines(t *testing.T) {
	inv := migSample()
	assert.Equal(t, []inventory.MIGSlices{{Resource: "nvidia.com/mig-1g.10gb", Total: 21, Used: 10}, {Resource: "nvidia.com/mig-3g.40gb", Total: 2, Used: 1}},
		inv.Pools["train-a100"].MIG)
	initPod := requesting(testPod("ai", "p", "n", "0", nil), "nvidia.com/mig-1g.10gb", "2")
	assert.Equal(t, "0 +2 mig-1g.10gb", podAcceleratorsCell(initPod))
}

func TestMIGDescribeNode(t *testing.T) {
	n := withAllocatable(testNode("mig-a", "train-a100", "", "A100-80G", 4, true), "nvidia.com/mig-1g.10gb", "14")
	slices := requesting(testPod("ai", "slices", "mig-a", "0", map[string]string{policy.LabelWorkloadType: "inference"}), "nvidia.com/mig-1g.10gb", "3")
	whole := testPod("ai", "whole", "mig-a", "2", map[string]string{policy.LabelWorkloadType: "training"})
	var buf bytes.Buffer
	require.NoError(t, DescribeNode(&buf, n, []corev1.Pod{*slices, *whole}, &corev1.EventList{}))
	assert.Equal(t, `Name:                  mig-a
Pool:                  train-a100
Node Pool:             <none>
Status:                Running
Ready:                 true
Unschedulable:         false
GPU Type:              A100-80G
Driver Version:        535.104.05
Accelerators:          nvidia.com/gpu: 4 total, 2 used, 2 free
MIG Slices:            nvidia.com/mig-1g.10gb: 14 total, 3 used, 11 free (not counted as GPUs)
Litepool Labels:       runwhere.ai/gpu-type=A100-80G
                       runwhere.ai/pool=train-a100
Litepool Annotations:  <none>
Taints:                <none>
Pods:                  (2 non-terminated)
  Namespace  Name    Workload Type  Accelerators      Phase
  ---------  ----    -------------  ------------      -----
  ai         slices  inference      0 +3 mig-1g.10gb  Running
  ai         whole   training       2                 Running
Events:  <none>
`, buf.String())
}
