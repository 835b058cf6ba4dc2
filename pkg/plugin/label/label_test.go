package label

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func TestParseLabelArgs(t *testing.T) {
	set, remove, err := ParseLabelArgs([]string{"runwhere.ai/pool=train-a100", "runwhere.ai/health-", "runwhere.ai/gpu-type="})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"runwhere.ai/pool": "train-a100", "runwhere.ai/gpu-type": ""}, set)
	assert.Equal(t, []string{"runwhere.ai/health"}, remove)

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"pool=x"}, `[N1] label key "pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`},
		{[]string{"pool-"}, `[N1] label key "pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`},
		{[]string{"runwhere.ai/pool=pool-a", "runwhere.ai/pool=pool-b"}, `label "runwhere.ai/pool" is given twice`},
		{[]string{"runwhere.ai/pool=train-a100", "runwhere.ai/pool-"}, `label "runwhere.ai/pool" is both set and removed`},
		{[]string{"runwhere.ai/workload-type=batch"}, `[N1] invalid value "batch" for label "runwhere.ai/workload-type": unknown workload type "batch": must be one of training, inference, development, compute`},
		{[]string{"runwhere.ai/pool"}, `invalid label argument "runwhere.ai/pool": expected KEY=VALUE or KEY-`},
	}
	for _, tt := range tests {
		_, _, err := ParseLabelArgs(tt.args)
		assert.EqualError(t, err, tt.want, "%v", tt.args)
	}
}

func node(name, pool, gpu string) *corev1.Node {
	labels := map[string]string{policy.LabelGPUType: gpu}
	if pool != "" {
		labels[policy.LabelPool] = pool
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func pool(name, gpu string, minNodes int32, exclusive bool) *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Accelerator: v1alpha1.AcceleratorSpec{Type: gpu}, MinNodes: minNodes, Exclusive: exclusive}}
}

func podOn(name, nodeName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ai-team", Name: name},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// cluster: train-a100 (A100, minNodes 3, exclusive) holds a1 (running ai-team/job-0),
// a2 and a4 (which carries a well-formed runwhere.ai/force annotation); a3 (A100) and
// g1 (A10) are in no pool; lbl-pool is a pool of labels only (l1, A100).
func cluster(t *testing.T) *kittest.Factory {
	a1 := node("a1", "train-a100", "A100-80G")
	a1.Spec.Taints = []corev1.Taint{policy.ExclusiveTaint("train-a100")}
	a4 := node("a4", "train-a100", "A100-80G")
	a4.Annotations = map[string]string{policy.AnnotationForce: "alice: replacing a PSU"}
	return kittest.NewFactory(t,
		pool("train-a100", "A100-80G", 3, true), pool("infer-a10", "A10-24G", 1, false),
		a1, node("a2", "train-a100", "A100-80G"), node("a3", "", "A100-80G"), a4, node("g1", "", "A10-24G"),
		node("l1", "lbl-pool", "A100-80G"), podOn("job-0", "a1"))
}

func TestLabelNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		out    string
		node   string
		pool   string // the node's pool label afterwards
		taints []corev1.Taint
		events []string
	}{
		{"joins an exclusive pool: label, taint and event", []string{"a3", "runwhere.ai/pool=train-a100"}, "node/a3 labeled\n",
			"a3", "train-a100", []corev1.Taint{policy.ExclusiveTaint("train-a100")},
			[]string{"AddedToPool: node a3 added to pool train-a100 (kubectl litepool label)"}},
		{"joins a pool of labels", []string{"a3", "runwhere.ai/pool=lbl-pool"}, "node/a3 labeled\n",
			"a3", "lbl-pool", nil, []string{"AddedToPool: node a3 added to pool lbl-pool (kubectl litepool label)"}},
		{"the last node of a pool of labels leaves: the pool is gone", []string{"l1", "runwhere.ai/pool-"}, "node/l1 labeled\n",
			"l1", "", nil, []string{"RemovedFromPool: node l1 removed from pool lbl-pool (kubectl litepool label)"}},
		{"a label that does not move the node", []string{"a2", "runwhere.ai/health=healthy"}, "node/a2 labeled\n",
			"a2", "train-a100", nil, nil},
		{"nothing to change", []string{"a2", "runwhere.ai/pool=train-a100"}, "node/a2 not labeled\n",
			"a2", "train-a100", nil, nil},
		{"client dry run changes nothing", []string{"a3", "runwhere.ai/pool=train-a100", "--dry-run=client"}, "node/a3 labeled (dry run)\n",
			"a3", "", nil, nil},
		{"server dry run changes nothing", []string{"a3", "runwhere.ai/pool=train-a100", "--dry-run=server"}, "node/a3 labeled (server dry run)\n",
			"a3", "", nil, nil},
		{"-o name", []string{"a3", "runwhere.ai/pool=train-a100", "-o", "name"}, "node/a3\n",
			"a3", "train-a100", []corev1.Taint{policy.ExclusiveTaint("train-a100")},
			[]string{"AddedToPool: node a3 added to pool train-a100 (kubectl litepool label)"}},
		{"-o jsonpath shows the node as it would be written", []string{"a3", "runwhere.ai/pool=train-a100", "--dry-run=client", "-o", "jsonpath={.spec.taints[0].key}={.spec.taints[0].value}"},
			"runwhere.ai/pool=train-a100", "a3", "", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t)
			r := kittest.Run(f, NewCmdLabelNode, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			n := f.Node(t, tc.node)
			assert.Equal(t, tc.pool, n.Labels[policy.LabelPool])
			assert.Equal(t, tc.taints, n.Spec.Taints)
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

// Once a node joins and a1's pod is gone, a1 may leave: its pool label goes, with the
// pool's taint; each move records its event.
func TestLabelNodeJoinsThenLeaves(t *testing.T) {
	f := cluster(t)
	require.NoError(t, kittest.Run(f, NewCmdLabelNode, "", "a3", "runwhere.ai/pool=train-a100").Err)
	require.NoError(t, f.Kube.CoreV1().Pods("ai-team").Delete(context.Background(), "job-0", metav1.DeleteOptions{}))
	r := kittest.Run(f, NewCmdLabelNode, "", "a1", "runwhere.ai/pool-", "runwhere.ai/health=healthy")
	require.NoError(t, r.Err)
	assert.Equal(t, "node/a1 labeled\n", r.Out)
	n := f.Node(t, "a1")
	assert.NotContains(t, n.Labels, policy.LabelPool)
	assert.Equal(t, "healthy", n.Labels["runwhere.ai/health"])
	assert.Empty(t, n.Spec.Taints, "the exclusive taint goes with the pool")
	assert.Equal(t, []string{
		"AddedToPool: node a3 added to pool train-a100 (kubectl litepool label)",
		"RemovedFromPool: node a1 removed from pool train-a100 (kubectl litepool label)",
	}, f.Events(t))
}

// The refusals are the webhook's own rule functions (policy.AdmitNode), with its texts;
// nothing changes and no event is recorded.
func TestLabelNodeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		args       []string
		want       string
	}{
		{"N3: leaving with workload pods", "N3", []string{"a1", "runwhere.ai/pool-"},
			`[N3] node "a1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/job-0); drain it first (kubectl litepool drain a1) or wait for them to finish`},
		{"N3: below minNodes", "N3", []string{"a2", "runwhere.ai/pool-"},
			`[N3] node "a2" cannot leave pool "train-a100": the pool would have 2 Ready node(s), below its minNodes 3; lower spec.minNodes first or add a node (a NotReady member may leave)`},
		{"N3 is not overridden by a force annotation through label", "N3", []string{"a4", "runwhere.ai/pool=infer-a10", "runwhere.ai/gpu-type=A10-24G", "--overwrite"},
			`[N3] node "a4" cannot leave pool "train-a100": the pool would have 2 Ready node(s), below its minNodes 3; lower spec.minNodes first or add a node (a NotReady member may leave)`},
		{"N2: joining a pool of another model", "N2", []string{"g1", "runwhere.ai/pool=train-a100"},
			`[N2] node "g1" (gpu-type A10-24G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`},
		{"N2: joining a pool of labels of another model", "N2", []string{"g1", "runwhere.ai/pool=lbl-pool"},
			`[N2] node "g1" (gpu-type A10-24G) cannot join pool "lbl-pool": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`},
		{"N2: changing the model inside a pool", "N2", []string{"a2", "runwhere.ai/gpu-type=H100-80G", "--overwrite"},
			`[N2] node "a2" (gpu-type H100-80G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for H100-80G nodes`},
		{"N2 and N3 at once: the first, as before", "N2", []string{"a1", "runwhere.ai/pool=infer-a10", "--overwrite"},
			`[N2] node "a1" (gpu-type A100-80G) cannot join pool "infer-a10": the pool takes only A10-24G nodes; choose a node labelled runwhere.ai/gpu-type=A10-24G or a pool for A100-80G nodes`},
		{"no silent overwrite", "", []string{"a2", "runwhere.ai/pool=infer-a10"},
			`'runwhere.ai/pool' already has a value (train-a100), and --overwrite is false; nothing was changed`},
		{"N1: no prefix", "N1", []string{"a3", "pool=train-a100"},
			`[N1] label key "pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`},
		{"unknown output", "", []string{"a3", "runwhere.ai/pool=train-a100", "-o", "table"},
			`unable to match a printer suitable for the output format "table", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,yaml`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t)
			before := nodes(t, f)
			r := kittest.Run(f, NewCmdLabelNode, "", tc.args...)
			require.EqualError(t, r.Err, tc.want)
			var v *policy.Violation
			if tc.rule != "" && assert.True(t, errors.As(r.Err, &v), "a typed violation") {
				assert.Equal(t, tc.rule, v.Rule)
			}
			assert.Empty(t, r.Out)
			assert.Equal(t, before, nodes(t, f), "nothing changed")
			assert.Empty(t, f.Events(t))
		})
	}
}

// A write the API server refuses is the command's error; nothing changes, no event.
func TestLabelNodeWriteFails(t *testing.T) {
	f := cluster(t)
	f.Kube.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
	})
	r := kittest.Run(f, NewCmdLabelNode, "", "a3", "runwhere.ai/pool=train-a100")
	require.EqualError(t, r.Err, "Internal error occurred: connection lost")
	assert.Empty(t, r.Out)
	assert.NotContains(t, f.Node(t, "a3").Labels, policy.LabelPool)
	assert.Empty(t, f.Events(t))
}

func TestLabelNodeUnknownNode(t *testing.T) {
	f := cluster(t)
	r := kittest.Run(f, NewCmdLabelNode, "", "no-such-node", "runwhere.ai/health=healthy")
	require.True(t, apierrors.IsNotFound(r.Err), "%v", r.Err)
	assert.Empty(t, r.Out)
}

func nodes(t *testing.T, f *kittest.Factory) []corev1.Node {
	t.Helper()
	list, err := f.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return list.Items
}
