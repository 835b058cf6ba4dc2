package inventory

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Total and used are every member's, as kubectl shows nodes; free is the members in
// service only (policy.NodeOut, what the quota and the domains count): a NotReady,
// cordoned, quarantined or upgrading member, or one tainted beyond what the pool's pods
// tolerate, adds its accelerators to the total and its pods to used, and nothing to
// free. A taint they tolerate (the pool's own, nvidia.com/gpu:NoSchedule, which
// ExtendedResourceToleration tolerates for GPU pods) leaves the member in service.
// Before, free was total - used over the Ready members: 48 - 20 = 28, counting the
// cordoned, quarantined, upgrading and tainted members' idle GPUs as free.
func TestMembersOutOfServiceCountInTotalNotFree(t *testing.T) {
	b := NewBuilder()
	b.AddPod(gpuPod("on-ready", "n1", corev1.PodRunning, "4"))
	b.AddPod(gpuPod("on-notready", "n2", corev1.PodRunning, "8"))
	b.AddPod(gpuPod("on-cordoned", "cordoned", corev1.PodRunning, "2"))
	b.AddPod(gpuPod("on-gpu-tainted", "gpu-tainted", corev1.PodRunning, "6"))
	b.AddNode(gpuNode("n1", "train", 8, true))
	b.AddNode(gpuNode("n2", "train", 8, false))
	cordoned := gpuNode("cordoned", "train", 8, true)
	cordoned.Spec.Unschedulable = true
	b.AddNode(cordoned)
	quarantined := gpuNode("quarantined", "train", 8, true)
	quarantined.Spec.Taints = []corev1.Taint{{Key: policy.TaintQuarantine, Effect: corev1.TaintEffectNoSchedule}}
	b.AddNode(quarantined)
	tainted := gpuNode("tainted", "train", 8, true)
	tainted.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute}}
	b.AddNode(tainted)
	gpuTainted := gpuNode("gpu-tainted", "train", 8, true)
	gpuTainted.Spec.Taints = []corev1.Taint{{Key: policy.TaintKeyNvidiaGPU, Effect: corev1.TaintEffectNoSchedule},
		policy.ExclusiveTaint("train")}
	b.AddNode(gpuTainted)
	train := b.Build().Pools["train"]
	// n1 4 free, gpu-tainted 2 free; the other four members are out of service.
	assert.Equal(t, []int64{48, 20, 6}, []int64{train.Total, train.Used, train.Free})
	inService := map[string]bool{}
	for _, n := range train.Nodes {
		inService[n.Name] = n.InService
	}
	assert.Equal(t, map[string]bool{"n1": true, "n2": false, "cordoned": false, "quarantined": false, "tainted": false, "gpu-tainted": true}, inService)
	assert.Equal(t, 5, train.ReadyNodes)
	assert.Equal(t, map[policy.NodeState]int{policy.NodeRunning: 4, policy.NodeCordoned: 1, policy.NodeNotReady: 1}, train.NodeStates)
	n2 := train.Nodes[slices.IndexFunc(train.Nodes, func(n *Node) bool { return n.Name == "n2" })]
	assert.Equal(t, []int64{8, 8, 0}, []int64{n2.Total, n2.Used, n2.Free()}, "the node itself still shows what its pods request")
}

func TestSetStatusAndConditions(t *testing.T) {
	b := NewBuilder()
	b.AddPod(gpuPod("p", "n1", corev1.PodRunning, "2"))
	up := gpuNode("n2", "train", 8, true)
	up.Annotations = map[string]string{policy.AnnotationUpgradeState: string(policy.UpgradeInstall)}
	b.AddNode(gpuNode("n1", "train", 8, true))
	b.AddNode(up)
	b.AddNode(gpuNode("n3", "train", 8, false))
	inv := b.Build("empty")

	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: v1alpha1.PoolSpec{MinNodes: 3}}
	SetStatus(pool, inv.Pools["train"])
	s := pool.Status
	// every member in the total; free only n1's: n2 is mid-upgrade, n3 NotReady
	assert.Equal(t, []int64{24, 2, 6}, []int64{s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree})
	assert.Equal(t, map[string]int32{"Running": 1, "Upgrading": 1, "NotReady": 1}, s.NodeStates)
	assert.Equal(t, map[string]int32{"install": 1}, s.UpgradeStates)
	assert.Equal(t, policy.PoolUpgrading, s.Phase)

	conds := Conditions(pool, inv.Pools["train"])
	status := func(t string) metav1.ConditionStatus {
		c := apimeta.FindStatusCondition(conds, t)
		if c == nil {
			panic("no condition " + t)
		}
		return c.Status
	}
	assert.Equal(t, metav1.ConditionTrue, status(ConditionDegraded))
	assert.Equal(t, metav1.ConditionTrue, status(ConditionBelowMinNodes), "2 Ready nodes, minNodes 3")
	assert.Equal(t, metav1.ConditionTrue, status(ConditionUpgrading))

	pool.Spec.MinNodes = 2
	conds = Conditions(pool, inv.Pools["train"])
	assert.Equal(t, metav1.ConditionFalse, status(ConditionBelowMinNodes))

	empty := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}
	conds = Conditions(empty, inv.Pools["empty"])
	assert.Equal(t, metav1.ConditionTrue, status(ConditionBelowMinNodes), "minNodes defaults to 1")
	assert.Equal(t, metav1.ConditionFalse, status(ConditionDegraded))
	assert.Equal(t, metav1.ConditionFalse, status(ConditionUpgrading))
}

// A pool with a topology gets its domains in the same pass as its figures, and its
// status the bounded summary; a pool without one gets none.
func TestSetStatusTopology(t *testing.T) {
	pools := []v1alpha1.Pool{
		{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: v1alpha1.PoolSpec{Topology: &v1alpha1.TopologySpec{Levels: []string{"rack"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: v1alpha1.PoolSpec{Topology: &v1alpha1.TopologySpec{Preset: "Cray"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "flat"}},
	}
	b := NewBuilder()
	b.Topologies = TopologiesOf(pools)
	assert.Len(t, b.Topologies, 1, "a topology R1 refuses gives no domains")
	b.AddPod(gpuPod("p", "n1", corev1.PodRunning, "2"))
	for _, n := range []*corev1.Node{gpuNode("n1", "train", 8, true), gpuNode("n2", "train", 8, true),
		gpuNode("n3", "train", 8, true), gpuNode("n4", "train", 8, false), gpuNode("n5", "train", 8, true), gpuNode("f1", "flat", 8, true)} {
		if n.Name != "n5" {
			n.Labels["rack"] = map[bool]string{true: "r1", false: "r2"}[n.Name < "n3"]
		}
		b.AddNode(n)
	}
	inv := b.Build()
	train := inv.Pools["train"]
	assert.Equal(t, []string{"n5"}, train.Domains.Outside)
	SetStatus(&pools[0], train)
	assert.Equal(t, &v1alpha1.TopologyStatus{Unit: "rack", Domains: 2, Whole: 1, Degraded: 1, WholeFree: 0, Outside: 1, LargestFreeBlock: 14,
		Fullest: []v1alpha1.DomainSummary{{Name: "r2", Nodes: 2, ReadyNodes: 1, Total: 8, Free: 8, State: policy.DomainDegraded},
			{Name: "r1", Nodes: 2, ReadyNodes: 2, Total: 16, Free: 14, State: policy.DomainWhole}},
		Freest: []v1alpha1.DomainSummary{{Name: "r1", Nodes: 2, ReadyNodes: 2, Total: 16, Free: 14, State: policy.DomainWhole},
			{Name: "r2", Nodes: 2, ReadyNodes: 1, Total: 8, Free: 8, State: policy.DomainDegraded}}}, pools[0].Status.Topology)
	pools[2].Status.Topology = &v1alpha1.TopologyStatus{Unit: "stale"}
	SetStatus(&pools[2], inv.Pools["flat"])
	assert.Nil(t, pools[2].Status.Topology, "a pool without a topology has no summary, whatever it held")
}
