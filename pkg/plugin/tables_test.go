package plugin

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func testNode(name, pool, nodePool, gpuType string, gpus int64, ready bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	for k, v := range map[string]string{policy.LabelPool: pool, policy.LabelNodePool: nodePool, policy.LabelGPUType: gpuType} {
		if v != "" {
			n.Labels[k] = v
		}
	}
	if gpus > 0 {
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		n.Labels["nvidia.com/cuda.driver-version.full"] = "535.104.05"
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

func testPod(ns, name, node string, gpus string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// sample is a small cluster: two A100 nodes in train-a100 (one cordoned), a NotReady
// one, and a CPU node in the default pool.
func sample() *inventory.Inventory {
	b := inventory.NewBuilder()
	b.AddPod(testPod("ai", "train-0", "n1", "8", map[string]string{policy.LabelWorkloadType: "training"}))
	b.AddPod(testPod("ai", "train-1", "n2", "2", nil))
	cordoned := testNode("n2", "train-a100", "np1", "A100-80G", 8, true)
	cordoned.Spec.Unschedulable = true
	b.AddNode(testNode("n1", "train-a100", "np1", "A100-80G", 8, true))
	b.AddNode(cordoned)
	b.AddNode(testNode("n3", "train-a100", "", "A100-80G", 8, false))
	b.AddNode(testNode("cpu", "", "", "", 0, true))
	return b.Build("dev-sandbox")
}

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
	nodes := nodesOf(sample())
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
	inv := sample()
	pools := []v1alpha1.Pool{{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{NodePools: []v1alpha1.NodePool{
		{Name: "np1", Labels: map[string]string{"team": "llm", policy.LabelWorkloadType: "training"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "np-empty"},
	}}}}
	inv.Nodes[3].NodePool = "orphan" // n3: a node-pool label no pool declares
	rows := NodePoolRows(pools, inv.Nodes)
	assert.Equal(t, `POOL         NODE POOL   STATUS     NODES   GPU TOTAL   GPU USED   GPU FREE   LABELS                                        TAINTS
train-a100   np-empty    Empty      0       0           0          0          <none>                                        <none>
train-a100   np1         Degraded   2       16          10         6          runwhere.ai/workload-type=training,team=llm   dedicated=llm:NoSchedule
train-a100   orphan      Degraded   1       0           0          0          <labels only>                                 <labels only>
`, printTable(t, true, NodePoolTable(rows)))
	view := rows[1].view()
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

func TestDescribeNode(t *testing.T) {
	n := testNode("n1", "train-a100", "np1", "A100-80G", 8, true)
	n.Annotations[policy.AnnotationUpgradeState] = "drain"
	n.Annotations["kwok.x-k8s.io/node"] = "fake"
	n.Spec.Taints = []corev1.Taint{{Key: policy.LabelPool, Value: "train-a100", Effect: corev1.TaintEffectNoSchedule}}
	ds := testPod("kube-system", "device-plugin", "n1", "0", nil)
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "dp", Controller: ptr.To(true)}}
	pods := []corev1.Pod{*testPod("ai", "train-0", "n1", "8", map[string]string{policy.LabelWorkloadType: "training"}), *ds}
	var buf bytes.Buffer
	require.NoError(t, DescribeNode(&buf, n, pods, &corev1.EventList{}))
	assert.Equal(t, `Name:                  n1
Pool:                  train-a100
Node Pool:             np1
Status:                Upgrading
Ready:                 true
Unschedulable:         false
GPU Type:              A100-80G
Driver Version:        535.104.05
Accelerators:          nvidia.com/gpu: 8 total, 8 used, 0 free
Litepool Labels:       runwhere.ai/gpu-type=A100-80G
                       runwhere.ai/node-pool=np1
                       runwhere.ai/pool=train-a100
Litepool Annotations:  runwhere.ai/upgrade-state=drain
Taints:                runwhere.ai/pool=train-a100:NoSchedule
Pods:                  (2 non-terminated)
  Namespace    Name           Workload Type  Accelerators  Phase
  ---------    ----           -------------  ------------  -----
  ai           train-0        training       8             Running
  kube-system  device-plugin  (daemon)       0             Running
Events:  <none>
`, buf.String())
}

func TestDescribePool(t *testing.T) {
	inv := sample()
	objects := []v1alpha1.Pool{{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{
		Description: "LLM", Tags: map[string]string{"team": "llm"}, Type: v1alpha1.PoolTypeInference,
		Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}, MinNodes: 2, Exclusive: true,
		Namespaces: []string{"ai"}, Software: v1alpha1.SoftwareSpec{Driver: "535.104.05", CUDA: "12.2"},
		NodePools: []v1alpha1.NodePool{{Name: "np1"}},
	}}}
	pool := kit.MergePools(objects, inv)[1]
	require.Equal(t, "train-a100", pool.Name)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := &corev1.EventList{Items: []corev1.Event{
		{InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n3"}, Type: "Normal", Reason: "RemovedFromPool",
			Message: "node n3 removed from pool train-a100", Source: corev1.EventSource{Component: "litepool"},
			EventTime: metav1.NewMicroTime(now.Add(-90 * time.Second))},
		{InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n3"}, Type: "Normal", Reason: "RemovingFromPool",
			Message: "removing node n3 from pool train-a100", Source: corev1.EventSource{Component: "litepool"},
			EventTime: metav1.NewMicroTime(now.Add(-120 * time.Second))},
	}}
	var buf bytes.Buffer
	err := tabbed(&buf, func(w prefixWriter) {
		describePoolBody(w, &pool, inv.Pools["train-a100"])
		for i := range evs.Items {
			e := &evs.Items[i]
			e.Message = "node/" + e.InvolvedObject.Name + ": " + e.Message
		}
		writeEvents(w, evs, now)
	})
	require.NoError(t, err)
	assert.Equal(t, `Name:             train-a100
Type:             Inference
Description:      LLM
Tags:             team=llm
Workloads:        inference
Min Nodes:        2
Exclusive:        true
Namespaces:       ai
Software:         driver 535.104.05, cuda 12.2
HCCL Op Retry:    disabled
Accelerator:      A100-80G (nvidia.com/gpu)
Status:           Degraded
Nodes:            3 (1 healthy, 2 faulty)
Accelerators:     16 total, 10 used, 6 free
Driver Versions:  535.104.05
Node Pools:
  Name  Nodes  Labels  Taints
  ----  -----  ------  ------
  np1   2      <none>  <none>
Members:
  Name  Node Pool  Status    GPU Type  Total  Used  Free  Driver      Workload Pods
  ----  ---------  ------    --------  -----  ----  ----  ------      -------------
  n1    np1        Running   A100-80G  8      8     0     535.104.05  1
  n2    np1        Cordoned  A100-80G  8      2     6     535.104.05  1
  n3    <none>     NotReady  A100-80G  8      0     8     535.104.05  0
Events:
  Type    Reason            Age   From      Message
  ----    ------            ----  ----      -------
  Normal  RemovingFromPool  2m    litepool  node/n3: removing node n3 from pool train-a100
  Normal  RemovedFromPool   90s   litepool  node/n3: node n3 removed from pool train-a100
`, buf.String())
}
