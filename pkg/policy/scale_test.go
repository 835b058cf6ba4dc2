package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func readyNode(name string, labels map[string]string) *corev1.Node {
	n := node(name, labels)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func TestPlanScaleUp(t *testing.T) {
	a100 := pool("train-a100", "A100-80G", 1)
	cordoned := readyNode("a100-c", map[string]string{LabelGPUType: "A100-80G"})
	cordoned.Spec.Unschedulable = true
	nodes := []*corev1.Node{
		readyNode("a100-z", map[string]string{LabelGPUType: "A100-80G"}),
		readyNode("a100-b", map[string]string{LabelGPUType: "A100-80G"}),
		readyNode("a100-member", map[string]string{LabelGPUType: "A100-80G", LabelPool: "train-a100"}),
		readyNode("a10-1", map[string]string{LabelGPUType: "A10-24G"}),
		node("a100-notready", map[string]string{LabelGPUType: "A100-80G"}),
		cordoned,
	}
	got, err := PlanScaleUp(a100, nodes, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"a100-b", "a100-z"}, names(got))

	_, err = PlanScaleUp(a100, nodes, 3)
	assert.EqualError(t, err, `[S1] pool "train-a100" needs 3 more node(s) but the default pool has 2 Running node(s) of gpu-type A100-80G (a100-b, a100-z); these default-pool nodes do not match it: a10-1 (A10-24G); add A100-80G nodes to the cluster or ask for fewer`)

	_, err = PlanScaleUp(pool("train-h100", "H100-80G", 1), nodes[3:4], 1)
	assert.EqualError(t, err, `[S1] pool "train-h100" needs 1 more node(s) but the default pool has 0 Running node(s) of gpu-type H100-80G; these default-pool nodes do not match it: a10-1 (A10-24G); add H100-80G nodes to the cluster or ask for fewer`)
}

func TestCheckScaleUpCandidate(t *testing.T) {
	a100 := pool("train-a100", "A100-80G", 1)
	assert.NoError(t, CheckScaleUpCandidate(a100, readyNode("n", map[string]string{LabelGPUType: "A100-80G"})))
	assert.EqualError(t, CheckScaleUpCandidate(a100, readyNode("a10-1", map[string]string{LabelGPUType: "A10-24G"})),
		`[N2] node "a10-1" (gpu-type A10-24G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`)
	assert.EqualError(t, CheckScaleUpCandidate(a100, readyNode("n", map[string]string{LabelGPUType: "A100-80G", LabelPool: "other-pool"})),
		`[S1] node "n" belongs to pool "other-pool", not to the default pool: remove it from "other-pool" first (kubectl litepool scale other-pool --remove n)`)
	assert.EqualError(t, CheckScaleUpCandidate(a100, readyNode("n", map[string]string{LabelPool: "train-a100"})),
		`[S1] node "n" is already in pool "train-a100"`)
}

func TestPlanScaleDown(t *testing.T) {
	p := pool("train-a100", "A100-80G", 2)
	members := []ScaleCandidate{
		{Name: "n1", State: NodeRunning, WorkloadPods: 1, Used: 8, Ready: true},
		{Name: "n2", State: NodeRunning, WorkloadPods: 1, Used: 4, Ready: true},
		{Name: "n3", State: NodeRunning, Ready: true},
		{Name: "n4", State: NodeRunning, Ready: true},
		{Name: "n5", State: NodeNotReady, WorkloadPods: 1, Used: 4},
		{Name: "n6", State: NodeRunning, WorkloadPods: 2, Used: 1, Ready: true},
	}
	tests := []struct {
		count int
		want  []string
	}{
		{1, []string{"n4"}},                   // idle, last name first
		{2, []string{"n4", "n3"}},             // both idle
		{3, []string{"n4", "n3", "n5"}},       // then 1 pod, 4 used, not Running first
		{4, []string{"n4", "n3", "n5", "n2"}}, // then the other 4-used node
	}
	for _, tt := range tests {
		got, err := PlanScaleDown(p, members, tt.count)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "count %d", tt.count)
	}
	_, err := PlanScaleDown(p, members, 5)
	assert.EqualError(t, err, `[N3] pool "train-a100" cannot shrink from 6 to 1 node(s): its minNodes is 2; lower spec.minNodes first (kubectl litepool edit pool train-a100 --min-nodes 1) or remove fewer nodes`)

	resuming := append([]ScaleCandidate(nil), members...)
	resuming[0].Resuming = true
	got, err := PlanScaleDown(p, resuming, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"n1", "n4"}, got, "a node an interrupted scale-down started on goes first")

	// minNodes 4 of 5 Ready members: one Ready node may go, then the NotReady one rather
	// than a second Ready node, which N3 would refuse half-way through the scale-down.
	got, err = PlanScaleDown(pool("train-a100", "A100-80G", 4), members, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"n4", "n5"}, got)
}

func TestCheckScaleDownNodes(t *testing.T) {
	p := pool("train-a100", "A100-80G", 2)
	members := []ScaleCandidate{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
	assert.NoError(t, CheckScaleDownNodes(p, members, []string{"n2"}))
	assert.EqualError(t, CheckScaleDownNodes(p, members, []string{"n2", "n3"}),
		`[N3] pool "train-a100" cannot shrink from 3 to 1 node(s): its minNodes is 2; lower spec.minNodes first (kubectl litepool edit pool train-a100 --min-nodes 1) or remove fewer nodes`)
	assert.EqualError(t, CheckScaleDownNodes(p, members, []string{"x"}),
		`[S2] node "x" is not a member of pool "train-a100"; its members are: n1, n2, n3`)
	assert.EqualError(t, CheckScaleDownNodes(p, members, []string{"n1", "n1"}), `[S2] node "n1" is named twice`)

	// Named Ready nodes must leave minNodes Ready ones, as N3 judges each departure.
	mixed := []ScaleCandidate{{Name: "r1", Ready: true}, {Name: "r2", Ready: true}, {Name: "u1"}, {Name: "u2"}}
	assert.NoError(t, CheckScaleDownNodes(p, mixed, []string{"u1", "u2"}), "NotReady members may go")
	assert.EqualError(t, CheckScaleDownNodes(p, mixed, []string{"r1"}),
		`[N3] pool "train-a100" cannot lose 1 node(s): it has 2 Ready node(s) and minNodes 2, and a Ready node may leave only while 2 Ready ones stay; remove at most 0 Ready and 2 NotReady node(s), or lower spec.minNodes first`)
}

func TestJoinAndLeave(t *testing.T) {
	p := pool("train-a100", "A100-80G", 1)
	p.Spec.Exclusive = true
	p.Spec.NodePools = []v1alpha1.NodePool{{Name: "np1", Labels: map[string]string{"team": "llm"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule}}}}
	n := node("n1", map[string]string{LabelGPUType: "A100-80G", "team": "other"})
	n.Spec.Taints = []corev1.Taint{{Key: "keep", Effect: corev1.TaintEffectNoExecute}}

	ApplyJoin(p, n)
	ApplyNodePool(&p.Spec.NodePools[0], n)
	assert.Equal(t, map[string]string{LabelGPUType: "A100-80G", LabelGPUTypeCamel: "A100-80G", LabelPool: "train-a100", LabelNodePool: "np1", "team": "llm"}, n.Labels)
	assert.Equal(t, []corev1.Taint{
		{Key: "keep", Effect: corev1.TaintEffectNoExecute},
		{Key: LabelPool, Value: "train-a100", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule},
	}, n.Spec.Taints)

	// Applying twice changes nothing.
	before := n.DeepCopy()
	ApplyJoin(p, n)
	ApplyNodePool(&p.Spec.NodePools[0], n)
	assert.Equal(t, before, n)

	ApplyLeave(p, n)
	assert.Equal(t, map[string]string{LabelGPUType: "A100-80G"}, n.Labels)
	assert.Equal(t, []corev1.Taint{{Key: "keep", Effect: corev1.TaintEffectNoExecute}}, n.Spec.Taints)
}

// Every way a node joins a pool goes through ApplyJoin, and every way it leaves through
// ApplyLeave: gpuctl's jobs that name a GPU type select runwhere.ai/gpuType.
func TestJoinWritesGPUTypeLabels(t *testing.T) {
	for _, c := range []struct {
		name      string
		poolType  string
		labels    map[string]string
		joined    map[string]string
		afterLeft map[string]string
	}{
		{name: "node without gpu-type takes the pool's model", poolType: "A100-80G",
			labels:    map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB"},
			joined:    map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB", LabelPool: "p", LabelGPUType: "A100-80G", LabelGPUTypeCamel: "A100-80G"},
			afterLeft: map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB", LabelGPUType: "A100-80G"}},
		{name: "node's own gpu-type is kept and copied", poolType: "NVIDIA-A10",
			labels:    map[string]string{LabelGPUType: "a10-24g"},
			joined:    map[string]string{LabelPool: "p", LabelGPUType: "a10-24g", LabelGPUTypeCamel: "a10-24g"},
			afterLeft: map[string]string{LabelGPUType: "a10-24g"}},
		{name: "a stale gpuType follows gpu-type", poolType: "A10",
			labels:    map[string]string{LabelGPUType: "A10", LabelGPUTypeCamel: "H100"},
			joined:    map[string]string{LabelPool: "p", LabelGPUType: "A10", LabelGPUTypeCamel: "A10"},
			afterLeft: map[string]string{LabelGPUType: "A10"}},
		{name: "CPU pool, CPU node: no model labels",
			labels:    nil,
			joined:    map[string]string{LabelPool: "p"},
			afterLeft: map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pool("p", c.poolType, 1)
			n := node("n1", c.labels)
			ApplyJoin(p, n)
			assert.Equal(t, c.joined, n.Labels)
			ApplyLeave(p, n)
			assert.Equal(t, c.afterLeft, n.Labels)
		})
	}
}

func TestValidateNodePool(t *testing.T) {
	ok := &v1alpha1.NodePool{Name: "np1", Labels: map[string]string{"team": "llm", LabelWorkloadType: "training"},
		Taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}}
	assert.NoError(t, ValidateNodePool(ok))
	assert.EqualError(t, ValidateNodePool(&v1alpha1.NodePool{Name: "np1", Labels: map[string]string{"workload-type": "training"}}),
		`node pool "np1": [N1] label key "workload-type" looks like litepool's "runwhere.ai/workload-type": use "runwhere.ai/workload-type"`)
	assert.EqualError(t, ValidateNodePool(&v1alpha1.NodePool{Name: "np1", Labels: map[string]string{LabelPool: "x"}}),
		`[N1] node pool "np1": label "runwhere.ai/pool" is set by litepool itself and cannot be a node-pool label`)
	assert.EqualError(t, ValidateNodePool(&v1alpha1.NodePool{Name: "np1", Taints: []corev1.Taint{{Key: "a", Effect: "Never"}}}),
		`[N1] node pool "np1": taint "a" has effect "Never": must be NoSchedule, PreferNoSchedule or NoExecute`)
}
