package poolcreate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
)

// printed remembers what Apply reported.
type printed []string

func (p *printed) Print(obj runtime.Object, operation string) error {
	name := ""
	switch o := obj.(type) {
	case *corev1.Node:
		name = "node/" + o.Name
	case *v1alpha1.Pool:
		name = "pool/" + o.Name
	default:
		name = fmt.Sprintf("%T", obj)
	}
	*p = append(*p, name+" "+operation)
	return nil
}

func gpuNode(name, pool, gpuType string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if pool != "" {
		n.Labels[policy.LabelPool] = pool
	}
	if gpuType != "" {
		n.Labels[policy.LabelGPUType] = gpuType
	}
	return n
}

// creator over fakes: f1, f2 (A100-80G) in the default pool, l1 (A100-80G) in the
// label-only pool "train", o1 in pool "other".
func creator(t *testing.T) (*Creator, *fake.Clientset, *dynamicfake.FakeDynamicClient, *printed) {
	kube := fake.NewClientset(gpuNode("f1", "", "A100-80G"), gpuNode("f2", "", "A100-80G"),
		gpuNode("l1", "train", "A100-80G"), gpuNode("o1", "other", "A100-80G"))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.PoolResource: "PoolList"})
	out := &printed{}
	return &Creator{Kube: kube, Pools: poolclient.New(dyn), GPUResource: "nvidia.com/gpu", Printer: out}, kube, dyn, out
}

func gpuctlDoc(source, pool string, nodes ...string) Document {
	d := Document{Source: source, Pool: &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Exclusive: true, Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}}}
	for _, n := range nodes {
		d.Nodes = append(d.Nodes, policy.GpuctlNode{Name: n, GPUType: "A100-80G"})
	}
	return d
}

// Check judges every document before anything changes and reports every problem at
// once, each with its source.
func TestCheckReportsEveryProblemAtOnce(t *testing.T) {
	c, kube, _, _ := creator(t)
	_, err := c.Check(context.Background(), []Document{
		gpuctlDoc("a.yaml", "train", "f1", "o1", "ghost"),
		gpuctlDoc("b.yaml", "train"),
	})
	require.EqualError(t, err, "nothing was created:\n"+
		`a.yaml: [S1] node "o1" belongs to pool "other": remove it from "other" first (kubectl litepool scale other --remove o1)`+"\n"+
		`a.yaml: node "ghost" listed in pool "train" not found`+"\n"+
		`b.yaml: pool "train" is also defined in a.yaml`)
	for _, a := range kube.Actions() {
		assert.Contains(t, []string{"get", "list"}, a.GetVerb(), "a check only reads")
	}
}

// Apply creates, adopts and joins; a write that fails undoes what was done, newest
// first: the joined node leaves, the adopted member loses the taint, the Pool goes.
func TestApplyUndoesNewestFirst(t *testing.T) {
	c, kube, dyn, out := creator(t)
	ctx := context.Background()
	plan, err := c.Check(ctx, []Document{gpuctlDoc("a.yaml", "train", "f1", "f2")})
	require.NoError(t, err)

	updates := 0
	kube.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if updates++; updates == 3 { // l1's taint, f1's join, then f2's join fails
			return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
		}
		return false, nil, nil
	})
	err = c.Apply(ctx, plan)
	require.EqualError(t, err, "Internal error occurred: connection lost; what was done has been undone")
	assert.Equal(t, printed{"pool/train created", "node/l1 tainted", "node/f1 labeled"}, *out)

	// The undo, in order: f1 leaves (update 4), l1 loses its taint (update 5), the Pool is deleted.
	var undo []string
	for _, a := range kube.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			undo = append(undo, "update "+u.GetObject().(*corev1.Node).Name)
		}
	}
	assert.Equal(t, []string{"update l1", "update f1", "update f2", "update f1", "update l1"}, undo)
	deletes := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "delete" {
			deletes++
		}
	}
	assert.Equal(t, 1, deletes, "the Pool object is deleted")
	_, err = c.Pools.Get(ctx, "train")
	assert.True(t, apierrors.IsNotFound(err))

	for name, want := range map[string]map[string]string{
		"f1": {policy.LabelGPUType: "A100-80G"}, "f2": {policy.LabelGPUType: "A100-80G"},
		"l1": {policy.LabelPool: "train", policy.LabelGPUType: "A100-80G"},
	} {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, n.Labels, name)
		assert.Empty(t, n.Spec.Taints, name)
	}
}

// Check refuses a topology R1 refuses, and a floor above a domain of the nodes the new
// Pool adopts (l1, alone in super pod sp1), before anything changes.
func TestCheckJudgesTheTopology(t *testing.T) {
	c, kube, _, _ := creator(t)
	l1, err := kube.CoreV1().Nodes().Get(context.Background(), "l1", metav1.GetOptions{})
	require.NoError(t, err)
	l1.Labels["huawei.com/topotree.superpodid"], l1.Labels["huawei.com/topotree.rackid"] = "sp1", "r1"
	_, err = kube.CoreV1().Nodes().Update(context.Background(), l1, metav1.UpdateOptions{})
	require.NoError(t, err)
	kube.ClearActions()

	dup := gpuctlDoc("dup.yaml", "train")
	dup.Pool.Spec.Topology = &v1alpha1.TopologySpec{Levels: []string{"block", "block"}}
	_, err = c.Check(context.Background(), []Document{dup})
	require.EqualError(t, err, "nothing was created:\n"+`dup.yaml: [R1] level "block" is listed twice: each level is a different node label key`)

	floor := gpuctlDoc("floor.yaml", "train")
	floor.Pool.Spec.Topology = &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2}
	_, err = c.Check(context.Background(), []Document{floor})
	require.EqualError(t, err, "nothing was created:\n"+`floor.yaml: [R1] spec.topology.minNodesPerDomain 2 is above the members of domain "sp1" (1) of huawei.com/topotree.superpodid: a domain keeps at least that many while it stays in the pool; set it to 1 or less, or add members to those domains first`)

	floor.Pool.Spec.Topology.MinNodesPerDomain = 1
	_, err = c.Check(context.Background(), []Document{floor})
	require.NoError(t, err)
	for _, a := range kube.Actions() {
		assert.Contains(t, []string{"get", "list"}, a.GetVerb(), "a check only reads")
	}
}
