package describe

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestDescribeNode(t *testing.T) {
	n := fixtures.Node("n1", "train-a100", "np1", "A100-80G", 8, true)
	n.Annotations[policy.AnnotationUpgradeState] = "drain"
	n.Annotations["kwok.x-k8s.io/node"] = "fake"
	n.Spec.Taints = []corev1.Taint{{Key: policy.LabelPool, Value: "train-a100", Effect: corev1.TaintEffectNoSchedule}}
	ds := fixtures.Pod("kube-system", "device-plugin", "n1", "0", nil)
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "dp", Controller: ptr.To(true)}}
	pods := []corev1.Pod{*fixtures.Pod("ai", "train-0", "n1", "8", map[string]string{policy.LabelWorkloadType: "training"}), *ds}
	var buf bytes.Buffer
	require.NoError(t, Describer{}.Node(&buf, n, pods, &corev1.EventList{}))
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
	inv := fixtures.Sample()
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
Accelerators:     24 total, 10 used, 0 free (14 idle on members out of service)
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

func TestMIGDescribeLines(t *testing.T) {
	inv := fixtures.MIGSample()
	assert.Equal(t, []inventory.MIGSlices{{Resource: "nvidia.com/mig-1g.10gb", Total: 21, Used: 10}, {Resource: "nvidia.com/mig-3g.40gb", Total: 2, Used: 1}},
		inv.Pools["train-a100"].MIG)
	initPod := fixtures.Requesting(fixtures.Pod("ai", "p", "n", "0", nil), "nvidia.com/mig-1g.10gb", "2")
	assert.Equal(t, "0 +2 mig-1g.10gb", Describer{}.podAcceleratorsCell(initPod))
}

func TestMIGDescribeNode(t *testing.T) {
	n := fixtures.WithAllocatable(fixtures.Node("mig-a", "train-a100", "", "A100-80G", 4, true), "nvidia.com/mig-1g.10gb", "14")
	slices := fixtures.Requesting(fixtures.Pod("ai", "slices", "mig-a", "0", map[string]string{policy.LabelWorkloadType: "inference"}), "nvidia.com/mig-1g.10gb", "3")
	whole := fixtures.Pod("ai", "whole", "mig-a", "2", map[string]string{policy.LabelWorkloadType: "training"})
	var buf bytes.Buffer
	require.NoError(t, Describer{}.Node(&buf, n, []corev1.Pod{*slices, *whole}, &corev1.EventList{}))
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

// describe through the command, against the fake API server: exact output, with event
// ages from the factory's clock.
func TestDescribeCommand(t *testing.T) {
	f := kittest.NewFactory(t, fixtures.Cluster()...)
	_, err := f.Kube.CoreV1().Events(metav1.NamespaceDefault).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "a100-2.1", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "a100-2"}, Type: "Normal", Reason: "Cordoned",
		Message: "node a100-2 cordoned by kubectl litepool", Source: corev1.EventSource{Component: "litepool"},
		EventTime: metav1.NewMicroTime(kittest.Now)}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.Kube.CoreV1().Events(metav1.NamespaceDefault).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "a100-1.1", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "a100-1"}, Related: &corev1.ObjectReference{Kind: "Pool", Name: "train-a100"},
		Type: "Normal", Reason: "AddedToPool", Message: "node a100-1 added to pool train-a100", Source: corev1.EventSource{Component: "litepool"},
		EventTime: metav1.NewMicroTime(kittest.Now.Add(60 * time.Second))}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.Clocks.Step(90 * time.Second)

	r := kittest.Run(f, NewCmdDescribe, "", "pool", "train-a100")
	require.NoError(t, r.Err)
	assert.Empty(t, r.ErrOut)
	assert.Equal(t, `Name:             train-a100
Type:             Training
Description:      <none>
Tags:             <none>
Workloads:        training, development
Min Nodes:        1
Exclusive:        false
Namespaces:       <all>
Software:         <none>
HCCL Op Retry:    disabled
Accelerator:      A100-80G (nvidia.com/gpu)
Status:           Degraded
Nodes:            2 (1 healthy, 1 faulty)
Accelerators:     16 total, 10 used, 0 free (6 idle on members out of service)
Driver Versions:  535.104.05
Node Pools:
  Name  Nodes  Labels  Taints
  ----  -----  ------  ------
  np1   2      <none>  <none>
Members:
  Name    Node Pool  Status    GPU Type  Total  Used  Free  Driver      Workload Pods
  ----    ---------  ------    --------  -----  ----  ----  ------      -------------
  a100-1  np1        Running   A100-80G  8      8     0     535.104.05  1
  a100-2  np1        Cordoned  A100-80G  8      2     6     535.104.05  1
Events:
  Type    Reason       Age   From      Message
  ----    ------       ----  ----      -------
  Normal  AddedToPool  30s   litepool  node/a100-1: node a100-1 added to pool train-a100
`, r.Out)

	r = kittest.Run(f, NewCmdDescribe, "", "node", "a100-2")
	require.NoError(t, r.Err)
	assert.Equal(t, `Name:                  a100-2
Pool:                  train-a100
Node Pool:             np1
Status:                Cordoned
Ready:                 true
Unschedulable:         true
GPU Type:              A100-80G
Driver Version:        535.104.05
Accelerators:          nvidia.com/gpu: 8 total, 2 used, 6 free
Litepool Labels:       runwhere.ai/gpu-type=A100-80G
                       runwhere.ai/node-pool=np1
                       runwhere.ai/pool=train-a100
Litepool Annotations:  <none>
Taints:                <none>
Pods:                  (1 non-terminated)
  Namespace  Name     Workload Type  Accelerators  Phase
  ---------  ----     -------------  ------------  -----
  ai         train-1  <none>         2             Running
Events:
  Type    Reason    Age   From      Message
  ----    ------    ----  ----      -------
  Normal  Cordoned  90s   litepool  node a100-2 cordoned by kubectl litepool
`, r.Out)

	r = kittest.Run(f, NewCmdDescribe, "", "pool", "nope")
	assert.EqualError(t, r.Err, `pools.runwhere.ai "nope" not found`)
	r = kittest.Run(f, NewCmdDescribe, "", "node", "nope")
	assert.EqualError(t, r.Err, `nodes "nope" not found`)
	assert.Empty(t, r.Out)
}
