package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func pool(name, gpuType string, minNodes int32) *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Accelerator: v1alpha1.AcceleratorSpec{Type: gpuType}, MinNodes: minNodes}}
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestCheckJoin(t *testing.T) {
	a100 := pool("train-a100", "A100-80G", 1)
	assert.NoError(t, CheckJoin(a100, node("n1", map[string]string{LabelGPUType: "A100-80G"})))
	assert.NoError(t, CheckJoin(pool("cpu-pool", "", 1), node("n1", map[string]string{LabelGPUType: "A10-24G"})))
	assert.EqualError(t, CheckJoin(a100, node("a10-1", map[string]string{LabelGPUType: "A10-24G"})),
		`[N2] node "a10-1" (gpu-type A10-24G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`)
	assert.EqualError(t, CheckJoin(a100, node("cpu-1", nil)),
		`[N2] node "cpu-1" (gpu-type none) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for none nodes`)
}

func TestCheckLeave(t *testing.T) {
	p := pool("train-a100", "A100-80G", 2)
	leave := func(ready bool, readyRemaining int, pods ...string) Leave {
		return Leave{Pool: p, PoolName: p.Name, Node: "n1", NodeReady: ready, WorkloadPods: pods, Remaining: readyRemaining + 1, ReadyRemaining: readyRemaining}
	}
	assert.NoError(t, CheckLeave(leave(true, 2)))
	assert.EqualError(t, CheckLeave(leave(true, 1)),
		`[N3] node "n1" cannot leave pool "train-a100": the pool would have 1 Ready node(s), below its minNodes 2; lower spec.minNodes first or add a node (a NotReady member may leave)`)
	assert.NoError(t, CheckLeave(leave(false, 1)), "a NotReady member holds no capacity: it may leave at the floor")
	assert.NoError(t, CheckLeave(leave(false, 0)), "even when the pool is already below its floor")
	assert.EqualError(t, CheckLeave(leave(false, 5, "ai/a", "ai/b", "ai/c", "ai/d")),
		`[N3] node "n1" cannot leave pool "train-a100": it runs 4 workload pod(s) (ai/a, ai/b, ai/c and 1 more); drain it first (kubectl litepool drain n1) or wait for them to finish`)

	labels := Leave{PoolName: "labels-only", Node: "n1", NodeReady: true}
	assert.NoError(t, CheckLeave(labels), "a pool of labels only has no floor: its last idle node may leave")
	assert.True(t, labels.Dissolves())
	labels.Remaining = 1
	assert.False(t, labels.Dissolves())
	labels.WorkloadPods = []string{"ai/a"}
	assert.EqualError(t, CheckLeave(labels),
		`[N3] node "n1" cannot leave pool "labels-only": it runs 1 workload pod(s) (ai/a); drain it first (kubectl litepool drain n1) or wait for them to finish`, "the busy-node rule holds for every pool")
	assert.False(t, Leave{Pool: p, PoolName: p.Name}.Dissolves(), "a Pool object outlives its members")
}

func TestRemainingAfterDeparture(t *testing.T) {
	members := []string{"n1", "n2", "n3", "n4"}
	assert.Equal(t, 3, RemainingAfterDeparture(members, nil, "n1"))
	assert.Equal(t, 1, RemainingAfterDeparture(members, map[string]bool{"n2": true, "n3": true}, "n1"), "granted departures no longer count")
	assert.Equal(t, 2, RemainingAfterDeparture(members, map[string]bool{"n2": true, "gone": true}, "n1"), "a granted node the cache no longer shows is not subtracted twice")
	assert.Equal(t, 4, RemainingAfterDeparture(members, nil, "n9"), "a leaver the cache has not seen join")
}

func TestCheckPoolDelete(t *testing.T) {
	p := pool("train-a100", "A100-80G", 1)
	assert.NoError(t, CheckPoolDelete(p, nil))
	assert.EqualError(t, CheckPoolDelete(p, []string{"ai/llama-0"}),
		`[R2] pool "train-a100" cannot be deleted: 1 workload pod(s) run on its nodes (ai/llama-0); wait for them to finish, or confirm with the annotation runwhere.ai/confirm-delete=train-a100 (kubectl litepool delete pool train-a100 --force), which leaves the pods running`)
	p.Annotations = map[string]string{AnnotationConfirmDelete: "other-pool"}
	assert.Error(t, CheckPoolDelete(p, []string{"ai/llama-0"}), "a confirmation must name the pool itself")
	p.Annotations[AnnotationConfirmDelete] = "train-a100"
	assert.NoError(t, CheckPoolDelete(p, []string{"ai/llama-0"}))
}

func TestValidatePool(t *testing.T) {
	p := pool("train-a100", "A100-80G", 1)
	assert.NoError(t, ValidatePool(p, nil, 0))
	bad := p.DeepCopy()
	bad.Spec.Type = "Batch"
	bad.Spec.HCCL.OpRetry.MaxRetries = 11
	assert.EqualError(t, ValidatePool(bad, nil, 0),
		"[R1] unknown pool type \"Batch\": must be one of Training, Inference, Development, Compute\n[R1] hccl max retries 11 out of range: must be 1-10")

	changed := p.DeepCopy()
	changed.Spec.Accelerator.Type = "H100-80G"
	assert.EqualError(t, ValidatePool(changed, p, 3),
		`[R1] accelerator type of pool "train-a100" cannot change from "A100-80G" to "H100-80G" while it has 3 node(s); remove its nodes first`)
	assert.NoError(t, ValidatePool(changed, p, 0), "an empty pool may change its accelerator")
}

func TestHCCLEnv(t *testing.T) {
	spec := v1alpha1.PoolSpec{}
	assert.Nil(t, HCCLEnv(spec))
	spec.HCCL.OpRetry = v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}
	assert.Equal(t, []corev1.EnvVar{
		{Name: "HCCL_OP_RETRY_ENABLE", Value: "L0:0, L1:1, L2:1"},
		{Name: "HCCL_OP_RETRY_PARAMS", Value: "MaxCnt:3,HoldTime:60000,IntervalTime:1000"},
	}, HCCLEnv(spec))
	spec.HCCL.OpRetry = v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 10, RetryTimeoutSeconds: 30}
	assert.Equal(t, "MaxCnt:10,HoldTime:3000,IntervalTime:1000", HCCLEnv(spec)[1].Value)
}

func TestCheckAdoption(t *testing.T) {
	p := pool("infer-a10", "A10-24G", 1)
	node := func(name, gpu string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelPool: "infer-a10", LabelGPUType: gpu}}}
	}
	assert.NoError(t, CheckAdoption(p, []*corev1.Node{node("a10-node-1", "A10-24G")}))
	assert.NoError(t, CheckAdoption(p, nil), "nothing to adopt")
	assert.EqualError(t, CheckAdoption(p, []*corev1.Node{node("a10-node-1", "A10-24G"), node("a100-node-9", "A100-80G")}),
		`[R1] pool "infer-a10" with accelerator type "A10-24G" cannot adopt the 1 node(s) labelled runwhere.ai/pool=infer-a10 whose gpu-type differs: a100-node-9 (gpu-type A100-80G); set spec.accelerator.type to their gpu-type, or take those nodes out of the pool first`)
	assert.EqualError(t, CheckAdoption(p, []*corev1.Node{node("b-node", "A100-80G"), node("a-node", "A100-80G")}),
		`[R1] pool "infer-a10" with accelerator type "A10-24G" cannot adopt the 2 node(s) labelled runwhere.ai/pool=infer-a10 whose gpu-type differs: a-node (gpu-type A100-80G), b-node (gpu-type A100-80G); set spec.accelerator.type to their gpu-type, or take those nodes out of the pool first`,
		"named in order, whatever order the cache gives them in")
	p.Spec.Accelerator.Type = ""
	assert.NoError(t, CheckAdoption(p, []*corev1.Node{node("a100-node-9", "A100-80G")}), "a pool with no accelerator type takes any node")
}
