package scale

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
	corev1 "k8s.io/api/core/v1"
)

// cluster: pool train (A100-80G, minNodes 1) with t1 and t2, a training pod on t2
// (owned by a ReplicaSet, so drains evict it), and in the default pool f1 and f2
// (A100-80G) and f3 (L40S). evict answers evictions first (nil: they succeed).
func cluster(t *testing.T, evict func(string) error) *kittest.Factory {
	pod := fixtures.Pod("ai", "train-0", "t2", "4", map[string]string{policy.LabelWorkloadType: "training"})
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}}
	return kittest.NewFactory(t,
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining,
			MinNodes: 1, Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}},
		fixtures.Node("t1", "train", "", "A100-80G", 8, true), fixtures.Node("t2", "train", "", "A100-80G", 8, true),
		fixtures.Node("f1", "", "", "A100-80G", 8, true), fixtures.Node("f2", "", "", "A100-80G", 8, true),
		fixtures.Node("f3", "", "", "L40S", 4, true), pod,
	).WithEviction(evict)
}

// failNth makes the n-th write of verb to nodes fail, as a lost connection would.
func failNth(f *kittest.Factory, verb string, n int) {
	count := 0
	f.Kube.PrependReactor(verb, "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if count++; count == n {
			return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
		}
		return false, nil, nil
	})
}

// state is, per node, its pool and whether it is cordoned or marked for a scale-down.
func state(t *testing.T, f *kittest.Factory, names ...string) map[string]string {
	return f.Nodes(t, func(n *corev1.Node) string {
		s := "pool=" + n.Labels[policy.LabelPool]
		if n.Spec.Unschedulable {
			s += ",cordoned"
		}
		if m := n.Annotations[policy.AnnotationScaleDown]; m != "" {
			s += ",marked=" + m
		}
		return s
	}, names...)
}

func TestScaleUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		out    string
		after  map[string]string
		events []string
	}{
		{"named", []string{"train", "--add", "f1"}, "node/f1 added to pool train\npool.runwhere.ai/train scaled from 2 to 3 node(s)\n",
			map[string]string{"f1": "pool=train", "f2": "pool=", "f3": "pool=", "t1": "pool=train", "t2": "pool=train"},
			[]string{"AddedToPool: node f1 added to pool train"}},
		{"by count, picking the pool's model only", []string{"train", "--nodes", "4"},
			"node/f1 added to pool train\nnode/f2 added to pool train\npool.runwhere.ai/train scaled from 2 to 4 node(s)\n",
			map[string]string{"f1": "pool=train", "f2": "pool=train", "f3": "pool=", "t1": "pool=train", "t2": "pool=train"},
			[]string{"AddedToPool: node f1 added to pool train", "AddedToPool: node f2 added to pool train"}},
		{"client dry run", []string{"train", "--add", "f1", "--dry-run=client"},
			"node/f1 added to pool train (dry run)\npool.runwhere.ai/train scaled from 2 to 3 node(s) (dry run)\n",
			map[string]string{"f1": "pool=", "f2": "pool=", "f3": "pool=", "t1": "pool=train", "t2": "pool=train"}, nil},
		{"-o name", []string{"train", "--add", "f1", "-o", "name"}, "node/f1\npool.runwhere.ai/train\n",
			map[string]string{"f1": "pool=train", "f2": "pool=", "f3": "pool=", "t1": "pool=train", "t2": "pool=train"},
			[]string{"AddedToPool: node f1 added to pool train"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t, nil)
			r := kittest.Run(f, NewCmdScale, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Equal(t, tc.after, state(t, f, "t1", "t2", "f1", "f2", "f3"))
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

// A scale-up that finds its work done by another change (a concurrent scale, as two
// `scale --nodes 4` run at once) succeeds and says so: a node found already in the pool
// is reported and left there, and a scale by count stops once the pool has its size.
func TestScaleUpFindsOthersWork(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		others  []string // nodes another scale puts in the pool as ours reads f1
		out     string
		after   map[string]string
		ourJoin []string
	}{
		{"named node already in the pool", []string{"train", "--add", "t1"}, nil,
			"node/t1 already in pool train\npool.runwhere.ai/train already has 2 node(s)\n",
			map[string]string{"f1": "pool=", "f2": "pool=", "t1": "pool=train", "t2": "pool=train"}, nil},
		{"another scale took the first pick", []string{"train", "--nodes", "4"}, []string{"f1"},
			"node/f1 already in pool train\nnode/f2 added to pool train\npool.runwhere.ai/train scaled from 2 to 4 node(s)\n",
			map[string]string{"f1": "pool=train", "f2": "pool=train", "t1": "pool=train", "t2": "pool=train"},
			[]string{"AddedToPool: node f2 added to pool train"}},
		{"another scale reached the target", []string{"train", "--nodes", "4"}, []string{"f1", "f2"},
			"node/f1 already in pool train\npool.runwhere.ai/train already has 4 node(s)\n",
			map[string]string{"f1": "pool=train", "f2": "pool=train", "t1": "pool=train", "t2": "pool=train"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t, nil)
			done := false
			f.Kube.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if done || a.(k8stesting.GetAction).GetName() != "f1" {
					return false, nil, nil
				}
				done = true
				for _, name := range tc.others {
					obj, err := f.Kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", name)
					require.NoError(t, err)
					n := obj.(*corev1.Node)
					n.Labels[policy.LabelPool] = "train"
					require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, ""))
				}
				return false, nil, nil
			})
			r := kittest.Run(f, NewCmdScale, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Equal(t, tc.after, state(t, f, "t1", "t2", "f1", "f2"))
			assert.Equal(t, tc.ourJoin, f.Events(t))
		})
	}
}

// A join that fails puts back the nodes that had joined: the pool is as before.
func TestScaleUpRollsBack(t *testing.T) {
	f := cluster(t, nil)
	failNth(f, "update", 2)
	r := kittest.Run(f, NewCmdScale, "", "train", "--add", "f1,f2")
	assert.EqualError(t, r.Err, `adding node "f2" to pool "train": Internal error occurred: connection lost; node(s) f1 were put back in the default pool`)
	assert.Equal(t, "node/f1 added to pool train\n", r.Out)
	assert.Equal(t, map[string]string{"f1": "pool=", "f2": "pool=", "t1": "pool=train", "t2": "pool=train"}, state(t, f, "t1", "t2", "f1", "f2"))
	assert.Equal(t, []string{"AddedToPool: node f1 added to pool train"}, f.Events(t))
}

func TestScaleUpRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"train", "--add", "f3"}, "pool \"train\" was not scaled:\n[N2] node \"f3\" (gpu-type L40S) cannot join pool \"train\": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for L40S nodes"},
		{[]string{"train", "--nodes", "9"}, "[S1] pool \"train\" needs 7 more node(s) but the default pool has 2 Running node(s) of gpu-type A100-80G (f1, f2); these default-pool nodes do not match it: f3 (L40S); add A100-80G nodes to the cluster or ask for fewer"},
		{[]string{"default", "--nodes", "1"}, "the default pool cannot be scaled: it is the nodes that belong to no pool; scale the pool you want the nodes in or out of"},
		{[]string{"train", "--nodes", "3", "--add", "f1"}, "give exactly one of --nodes N, --add NODE... or --remove NODE..."},
		{[]string{"train", "--nodes", "-1"}, "invalid --nodes -1: it is the number of nodes the pool should have, 0 or more (a scale-down stops at the pool's minNodes)"},
		{[]string{"nope", "--nodes", "1"}, `pools.runwhere.ai "nope" not found`},
	} {
		f := cluster(t, nil)
		r := kittest.Run(f, NewCmdScale, "", tc.args...)
		assert.EqualError(t, r.Err, tc.err, "%v", tc.args)
		assert.Empty(t, r.Out)
		assert.Equal(t, map[string]string{"f1": "pool=", "f2": "pool=", "f3": "pool=", "t1": "pool=train", "t2": "pool=train"},
			state(t, f, "t1", "t2", "f1", "f2", "f3"), "refused: nothing changes")
	}
}

func TestScaleDown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		out   string
		err   string
		// errOut is the confirmation prompt, when the command asks.
		errOut string
		after  map[string]string
		pods   int
	}{
		{"named, confirmed with --yes", []string{"train", "--remove", "t2", "--yes"}, "",
			"node/t2 cordoned\nevicting pod ai/train-0\npod/train-0 evicted\nnode/t2 drained\nnode/t2 removed from pool train\nnode/t2 uncordoned\npool.runwhere.ai/train scaled from 2 to 1 node(s)\n",
			"", "", map[string]string{"t1": "pool=train", "t2": "pool="}, 0},
		{"by count takes the idle node", []string{"train", "--nodes", "1"}, "yes\n",
			"node/t1 cordoned\nnode/t1 drained\nnode/t1 removed from pool train\nnode/t1 uncordoned\npool.runwhere.ai/train scaled from 2 to 1 node(s)\n",
			"", "Risk: high: scale down pool \"train\" from 2 to 1 node(s)\n  Impact: node(s) t1 are cordoned and drained, then leave the pool and return, uncordoned, to the default pool\n  Impact: no workload pods run on them\n  Precaution: let jobs checkpoint first; PodDisruptionBudgets are respected, and a blocked drain puts everything back\nType \"yes\" to confirm: \n", map[string]string{"t1": "pool=", "t2": "pool=train"}, 1},
		{"not confirmed", []string{"train", "--remove", "t2"}, "no\n", "",
			`scale down pool "train" from 2 to 1 node(s): not confirmed (typed "no", expected "yes"); nothing was changed`,
			"Risk: high: scale down pool \"train\" from 2 to 1 node(s)\n  Impact: node(s) t2 are cordoned and drained, then leave the pool and return, uncordoned, to the default pool\n  Impact: 1 workload pod(s) are evicted: ai/train-0\n  Precaution: let jobs checkpoint first; PodDisruptionBudgets are respected, and a blocked drain puts everything back\nType \"yes\" to confirm: \n", map[string]string{"t1": "pool=train", "t2": "pool=train"}, 1},
		{"client dry run", []string{"train", "--remove", "t2", "--dry-run=client"}, "",
			"node/t2 cordoned (dry run)\nevicting pod ai/train-0 (dry run)\nnode/t2 drained (dry run)\nnode/t2 removed from pool train (dry run)\nnode/t2 uncordoned (dry run)\npool.runwhere.ai/train scaled from 2 to 1 node(s) (dry run)\n",
			"", "", map[string]string{"t1": "pool=train", "t2": "pool=train"}, 1},
		{"below minNodes", []string{"train", "--nodes", "0", "--yes"}, "", "",
			`[N3] pool "train" cannot shrink from 2 to 0 node(s): its minNodes is 1; lower spec.minNodes first (kubectl litepool edit pool train --min-nodes 1) or remove fewer nodes`,
			"", map[string]string{"t1": "pool=train", "t2": "pool=train"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t, nil)
			r := kittest.Run(f, NewCmdScale, tc.stdin, tc.args...)
			if tc.err == "" {
				require.NoError(t, r.Err)
			} else {
				assert.EqualError(t, r.Err, tc.err)
			}
			assert.Equal(t, tc.out, r.Out)
			assert.Equal(t, tc.errOut, r.ErrOut)
			assert.Equal(t, tc.after, state(t, f, "t1", "t2"))
			pods, err := f.Kube.CoreV1().Pods("ai").List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			assert.Len(t, pods.Items, tc.pods)
		})
	}
}

// A drain that fails puts every node the scale-down touched back as it was: in the
// pool, schedulable, unmarked; and says so.
func TestScaleDownRollsBackAFailedDrain(t *testing.T) {
	f := cluster(t, func(string) error { return apierrors.NewInternalError(errors.New("etcd timeout")) })
	r := kittest.Run(f, NewCmdScale, "", "train", "--remove", "t2", "--yes", "--timeout", "1s")
	assert.EqualError(t, r.Err, "scale-down of pool \"train\" stopped: drain of node \"t2\" failed: error when evicting pods/\"train-0\" -n \"ai\": Internal error occurred: etcd timeout\nno node left the pool; put back: t2 (uncordoned)")
	assert.Equal(t, "node/t2 cordoned\nevicting pod ai/train-0\n", r.Out)
	assert.Empty(t, r.ErrOut)
	assert.Equal(t, map[string]string{"t1": "pool=train", "t2": "pool=train"}, state(t, f, "t1", "t2"))
	assert.Equal(t, []string{"RemovingFromPool: removing node t2 from pool train",
		"ScaleDownStopped: scale-down of pool train stopped: node t2 stays in the pool: drain of node \"t2\" failed: error when evicting pods/\"train-0\" -n \"ai\": Internal error occurred: etcd timeout"},
		f.Events(t))
}

// A cordon that fails half-way puts back the nodes already cordoned.
func TestScaleDownRollsBackAFailedCordon(t *testing.T) {
	f := cluster(t, nil)
	require.NoError(t, f.Kube.Tracker().Add(fixtures.Node("t3", "train", "", "A100-80G", 8, true)))
	failNth(f, "update", 2)
	r := kittest.Run(f, NewCmdScale, "", "train", "--remove", "t1,t2", "--yes")
	assert.EqualError(t, r.Err, "scale-down of pool \"train\" stopped: Internal error occurred: connection lost\nno node left the pool; put back: t1 (uncordoned)")
	assert.Equal(t, "node/t1 cordoned\n", r.Out)
	assert.Equal(t, map[string]string{"t1": "pool=train", "t2": "pool=train", "t3": "pool=train"}, state(t, f, "t1", "t2", "t3"))
}
