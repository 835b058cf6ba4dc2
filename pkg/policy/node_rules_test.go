package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func withAnnotations(n *corev1.Node, kv ...string) *corev1.Node {
	n = n.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		n.Annotations[kv[i]] = kv[i+1]
	}
	return n
}

func TestAdmitNode(t *testing.T) {
	cat := testCatalog()
	cat.pods = map[string][]string{"a100-node-1": {"ai-team/llama-train-0"}}
	a100 := func(name string, extra ...string) *corev1.Node {
		l := map[string]string{"kubernetes.io/hostname": name, LabelGPUType: "A100-80G", LabelPool: "train-a100"}
		for i := 0; i < len(extra); i += 2 {
			if extra[i+1] == "-" {
				delete(l, extra[i])
				continue
			}
			l[extra[i]] = extra[i+1]
		}
		return node(name, l)
	}
	free := a100("a100-node-3")
	busy := a100("a100-node-1")
	spare := a100("a100-node-4", LabelPool, "-")
	a10 := node("a10-node-3", map[string]string{LabelGPUType: "A10-24G"})
	const force = "alice: replacing a failed PSU"

	tests := []struct {
		name      string
		node, old *corev1.Node
		warnings  []string
		forced    *Force
		wantErr   string
	}{
		{name: "N1 unrelated update", node: a100("a100-node-3", "team", "x"), old: free},
		{name: "N1 registered key", node: a100("a100-node-3", LabelHealth, HealthHealthy), old: free},
		{name: "N1 unknown runwhere.ai key", node: a100("a100-node-3", "runwhere.ai/zone", "a"), old: free,
			wantErr: `[N1] unknown label key "runwhere.ai/zone": keys under "runwhere.ai/" must be one of runwhere.ai/driver-version, runwhere.ai/gpu-type, runwhere.ai/gpuType, runwhere.ai/health, runwhere.ai/job-type, runwhere.ai/namespace, runwhere.ai/node-pool, runwhere.ai/pool, runwhere.ai/port, runwhere.ai/priority, runwhere.ai/quota, runwhere.ai/workload-type (node "a100-node-3")`},
		{name: "N1 look-alike key", node: a100("a100-node-3", "gpu-type", "A100-80G"), old: free,
			wantErr: `[N1] label key "gpu-type" looks like litepool's "runwhere.ai/gpu-type": use "runwhere.ai/gpu-type" (node "a100-node-3")`},
		{name: "N1 bad value", node: a100("a100-node-3", LabelHealth, "ok"), old: free,
			wantErr: `[N1] invalid value "ok" for label "runwhere.ai/health": must be one of healthy, degraded (node "a100-node-3")`},
		{name: "N1 existing bad label not judged again", node: a100("a100-node-3", "pool", "x", "team", "y"), old: a100("a100-node-3", "pool", "x")},
		{name: "N1 on create", node: node("new-1", map[string]string{"runwhere.ai.pool": "train-a100"}),
			wantErr: `[N1] label key "runwhere.ai.pool" looks like litepool's "runwhere.ai/pool": use "runwhere.ai/pool" (node "new-1")`},
		{name: "N2 matching join", node: a100("a100-node-4"), old: spare},
		{name: "N2 cross-type join", node: withLabel(a10, LabelPool, "train-a100"), old: a10,
			wantErr: `[N2] node "a10-node-3" (gpu-type A10-24G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`},
		{name: "N2 accelerator change inside a pool", node: a100("a100-node-3", LabelGPUType, "H100"), old: free,
			wantErr: `[N2] node "a100-node-3" (gpu-type H100) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for H100 nodes`},
		{name: "N2 label-only pool takes its members' model", node: withLabel(spare, LabelPool, "infer-a10"), old: spare,
			wantErr: `[N2] node "a100-node-4" (gpu-type A100-80G) cannot join pool "infer-a10": the pool takes only A10-24G nodes; choose a node labelled runwhere.ai/gpu-type=A10-24G or a pool for A100-80G nodes`},
		{name: "N2 a node may found a new label-only pool", node: withLabel(spare, LabelPool, "infer-a100"), old: spare},
		{name: "N2 join on create", node: withLabel(a10, LabelPool, "train-snt9b"),
			wantErr: `[N2] node "a10-node-3" (gpu-type A10-24G) cannot join pool "train-snt9b": the pool takes only Snt9B nodes; choose a node labelled runwhere.ai/gpu-type=Snt9B or a pool for A10-24G nodes`},
		{name: "N3 idle node leaves, pool stays at minNodes", node: a100("a100-node-3", LabelPool, "-"), old: free},
		{name: "N3 busy node may not leave", node: a100("a100-node-1", LabelPool, "-"), old: busy,
			wantErr: `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`},
		{name: "N3 moving to another pool is leaving", node: a100("a100-node-1", LabelPool, "infer-a100"), old: busy,
			wantErr: `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`},
		{name: "N3 busy node may not be deleted", old: busy,
			wantErr: `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`},
		{name: "N3 idle node deleted", old: free},
		{name: "N3 node outside pools deleted", old: spare},
		{name: "N3 forced leave", node: withAnnotations(a100("a100-node-1", LabelPool, "-"), AnnotationForce, force), old: busy,
			forced:   &Force{By: "alice", Reason: "replacing a failed PSU", Overrode: `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`},
			warnings: []string{`[N3] forced by alice (replacing a failed PSU) through runwhere.ai/force; overridden: node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish; remove the annotation when done (kubectl annotate node a100-node-1 runwhere.ai/force-)`}},
		{name: "N3 forced delete", old: withAnnotations(busy, AnnotationForce, force),
			forced:   &Force{By: "alice", Reason: "replacing a failed PSU", Overrode: `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`},
			warnings: []string{`[N3] forced by alice (replacing a failed PSU) through runwhere.ai/force; overridden: node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish; remove the annotation when done (kubectl annotate node a100-node-1 runwhere.ai/force-)`}},
		{name: "N3 force without who and why refused", node: withAnnotations(a100("a100-node-1", LabelPool, "-"), AnnotationForce, "yes"), old: busy,
			wantErr: "[N3] annotation runwhere.ai/force=\"yes\" does not say who forces and why: write it as \"<who>: <why>\" (e.g. \"alice: replacing a failed PSU\")\n" +
				`[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`},
		{name: "N3 force does not override N2", node: withAnnotations(withLabel(a10, LabelPool, "train-a100"), AnnotationForce, force), old: a10,
			wantErr: `[N2] node "a10-node-3" (gpu-type A10-24G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`},
		{name: "N3 joining with force armed warns", node: withAnnotations(a100("a100-node-4"), AnnotationForce, force), old: withAnnotations(spare, AnnotationForce, force),
			warnings: []string{`[N3] node "a100-node-4" joins pool "train-a100" carrying runwhere.ai/force: rule N3 stays overridden for it until the annotation is removed (kubectl annotate node a100-node-4 runwhere.ai/force-)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := AdmitNode(tt.node, tt.old, cat)
			assert.Equal(t, tt.warnings, d.Warnings)
			assert.Equal(t, tt.forced, d.Forced)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

func ready(n *corev1.Node, status corev1.ConditionStatus) *corev1.Node {
	n = n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

// counting is a catalog that counts a pool's remaining members, and the Ready ones.
type counting struct {
	catalog
	members, ready int
}

func (c counting) RemainingAfter(string, string) (int, int) { return c.members, c.ready }

func TestAdmitNodeMinNodes(t *testing.T) {
	old := node("a100-node-3", map[string]string{LabelGPUType: "A100-80G", LabelPool: "train-a100"})
	// train-a100 has minNodes 2; after the departure it keeps 2 members, 1 of them Ready.
	cat := counting{catalog: testCatalog(), members: 2, ready: 1}
	_, err := AdmitNode(nil, ready(old, corev1.ConditionTrue), cat)
	assert.EqualError(t, err, `[N3] node "a100-node-3" cannot leave pool "train-a100": the pool would have 1 Ready node(s), below its minNodes 2; lower spec.minNodes first or add a node (a NotReady member may leave)`)
	assert.Equal(t, []string{"N3"}, Rules(err))
	for _, status := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionUnknown} {
		d, err := AdmitNode(nil, ready(old, status), cat)
		assert.NoError(t, err, "a member whose Ready is %s is deleted at the floor", status)
		assert.Empty(t, d.Warnings)
	}
	_, err = AdmitNode(nil, old, cat)
	assert.NoError(t, err, "a member that never reported Ready holds no capacity either")

	cat.ready = 2
	_, err = AdmitNode(withLabel(ready(old, corev1.ConditionTrue), LabelPool, "other"), ready(old, corev1.ConditionTrue), cat)
	assert.NoError(t, err, "2 Ready members stay: the floor holds")
}

func TestAdmitNodeLabelPoolDissolves(t *testing.T) {
	cat := testCatalog() // infer-a10: a pool of labels only, 2 members
	cat.pods = map[string][]string{"a10-node-2": {"ai-team/vllm-0"}}
	last := ready(node("a10-node-1", map[string]string{LabelGPUType: "A10-24G", LabelPool: "infer-a10"}), corev1.ConditionTrue)
	gone := withLabel(last, LabelPool, "x")
	delete(gone.Labels, LabelPool)

	d, err := AdmitNode(gone, last, counting{catalog: cat, members: 1, ready: 1})
	assert.NoError(t, err)
	assert.Empty(t, d.Warnings, "another member remains: the pool stays")

	d, err = AdmitNode(gone, last, counting{catalog: cat, members: 0, ready: 0})
	assert.NoError(t, err, "the last idle node of a pool of labels may leave")
	assert.Equal(t, []string{`[N3] node "a10-node-1" was the last node of pool "infer-a10", a pool of labels only (no Pool object): the pool is gone; label a node runwhere.ai/pool=infer-a10 to make it again, or create a Pool object to give it a floor (minNodes)`}, d.Warnings)

	d, err = AdmitNode(nil, last, counting{catalog: cat, members: 0, ready: 0})
	assert.NoError(t, err, "deleting it dissolves the pool too")
	assert.Len(t, d.Warnings, 1)

	busy := ready(node("a10-node-2", map[string]string{LabelGPUType: "A10-24G", LabelPool: "infer-a10"}), corev1.ConditionTrue)
	d, err = AdmitNode(nil, busy, counting{catalog: cat, members: 0, ready: 0})
	assert.EqualError(t, err, `[N3] node "a10-node-2" cannot leave pool "infer-a10": it runs 1 workload pod(s) (ai-team/vllm-0); drain it first (kubectl litepool drain a10-node-2) or wait for them to finish`)
	assert.Empty(t, d.Warnings, "a refused departure dissolves nothing")
}

func TestParseForce(t *testing.T) {
	who, why, err := ParseForce(" bob : disk died: replacing ")
	assert.NoError(t, err)
	assert.Equal(t, []string{"bob", "disk died: replacing"}, []string{who, why})
	for _, bad := range []string{"", "bob", "bob:", ": why"} {
		_, _, err := ParseForce(bad)
		assert.Error(t, err, bad)
	}
}

func withLabel(n *corev1.Node, k, v string) *corev1.Node {
	n = n.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
	return n
}
