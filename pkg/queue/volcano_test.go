package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func volcanoClient(objs ...client.Object) client.Client {
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(VolcanoQueue, apimeta.RESTScopeRoot)
	mapper.Add(VolcanoHyperNode, apimeta.RESTScopeRoot)
	mapper.Add(VolcanoPodGroup, apimeta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), apimeta.RESTScopeRoot)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), apimeta.RESTScopeNamespace)
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...).Build()
}

func volcanoPool() *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train", UID: "uid-train"},
		Spec: v1alpha1.PoolSpec{Queue: &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueVolcano}}}
}

func TestVolcanoQueueCapabilityIsTheCapacity(t *testing.T) {
	c := volcanoClient()
	pool := volcanoPool()
	pool.Spec.Queue.Deserved, pool.Spec.Queue.Guarantee = ptr.To[int64](16), ptr.To[int64](8)
	st, err := Volcano{Client: c}.Sync(context.Background(), pool, capacity24, nil, false)
	require.NoError(t, err)
	q := get(t, c, VolcanoQueue, "", "train")
	require.NotNil(t, q)
	assert.True(t, OwnedBy(q, pool))
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "24"}, field(q, "spec", "capability"))
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "16"}, field(q, "spec", "deserved"))
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "8"}, field(q, "spec", "guarantee", "resource"))
	assert.Equal(t, int64(24), st.Quota)
	assert.Equal(t, v1alpha1.QueueVolcano, st.Scheduler)

	// The capacity drops to 16 (a member quarantined): the capability follows, and
	// fields others set (weight) stay.
	q.Object["spec"].(map[string]any)["weight"] = int64(3)
	require.NoError(t, c.Update(context.Background(), q))
	c16 := capacity24
	c16.Accelerators, c16.Nodes = 16, []string{"a", "b"}
	_, err = Volcano{Client: c}.Sync(context.Background(), pool, c16, nil, false)
	require.NoError(t, err)
	q = get(t, c, VolcanoQueue, "", "train")
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "16"}, field(q, "spec", "capability"))
	assert.EqualValues(t, 3, field(q, "spec", "weight"))
}

func TestVolcanoClampsDeservedAndGuaranteeToTheCapacity(t *testing.T) {
	c := volcanoClient()
	pool := volcanoPool()
	pool.Spec.Queue.Deserved, pool.Spec.Queue.Guarantee = ptr.To[int64](20), ptr.To[int64](12)
	c8 := capacity24
	c8.Accelerators = 8
	st, err := Volcano{Client: c}.Sync(context.Background(), pool, c8, nil, false)
	require.Error(t, err)
	assert.True(t, IsClamped(err), err)
	assert.Contains(t, err.Error(), "deserved 20 lowered to the capability 8")
	assert.Contains(t, err.Error(), "guarantee 12 lowered to 8")
	q := get(t, c, VolcanoQueue, "", "train")
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "8"}, field(q, "spec", "deserved"))
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "8"}, field(q, "spec", "guarantee", "resource"))
	assert.Equal(t, int64(8), *st.Deserved)
}

func TestVolcanoLeavesAQueueItDoesNotOwn(t *testing.T) {
	theirs := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"capability": map[string]any{"nvidia.com/gpu": "100"}}}}
	theirs.SetGroupVersionKind(VolcanoQueue)
	theirs.SetName("train")
	theirs.SetLabels(map[string]string{policy.LabelPool: "train"}) // a claim, not ownership
	c := volcanoClient(theirs)
	_, err := Volcano{Client: c}.Sync(context.Background(), volcanoPool(), capacity24, nil, false)
	require.Error(t, err)
	assert.True(t, IsNotOwned(err), err)
	q := get(t, c, VolcanoQueue, "", "train")
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "100"}, field(q, "spec", "capability"))
	require.NoError(t, Volcano{Client: c}.Remove(context.Background(), volcanoPool()))
	assert.NotNil(t, get(t, c, VolcanoQueue, "", "train"), "Remove deleted a Queue the pool does not own")
}

func topoNode(name, sp, rack string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		policy.LabelPool: "train", "example.com/superpod": sp, "example.com/rack": rack}}}
}

func TestVolcanoHyperNodesOnePerDomain(t *testing.T) {
	nodes := []client.Object{topoNode("n1", "sp1", "r1"), topoNode("n2", "sp1", "r2"), topoNode("n3", "sp2", "r1")}
	c := volcanoClient(nodes...)
	pool := volcanoPool()
	pool.Spec.Topology = &v1alpha1.TopologySpec{Levels: []string{"example.com/superpod", "example.com/rack"}}
	st, err := Volcano{Client: c}.Sync(context.Background(), pool, capacity24, nil, false)
	require.NoError(t, err)
	assert.Equal(t, int32(5), st.HyperNodes) // sp1, sp2, sp1/r1, sp1/r2, sp2/r1
	sp1 := get(t, c, VolcanoHyperNode, "", "train-sp1")
	require.NotNil(t, sp1)
	assert.True(t, OwnedBy(sp1, pool))
	assert.EqualValues(t, 2, field(sp1, "spec", "tier"))
	assert.Equal(t, []any{
		map[string]any{"type": "HyperNode", "selector": map[string]any{"exactMatch": map[string]any{"name": "train-sp1-r1"}}},
		map[string]any{"type": "HyperNode", "selector": map[string]any{"exactMatch": map[string]any{"name": "train-sp1-r2"}}},
	}, field(sp1, "spec", "members"))
	r1 := get(t, c, VolcanoHyperNode, "", "train-sp2-r1")
	require.NotNil(t, r1)
	assert.EqualValues(t, 1, field(r1, "spec", "tier"))
	assert.Equal(t, []any{map[string]any{"type": "Node", "selector": map[string]any{"labelMatch": map[string]any{
		"matchLabels": map[string]any{policy.LabelPool: "train", "example.com/superpod": "sp2", "example.com/rack": "r1"}}}}},
		field(r1, "spec", "members"))

	// sp2's only member leaves: its HyperNodes go.
	require.NoError(t, c.Delete(context.Background(), nodes[2]))
	st, err = Volcano{Client: c}.Sync(context.Background(), pool, capacity24, nil, false)
	require.NoError(t, err)
	assert.Equal(t, int32(3), st.HyperNodes)
	assert.Nil(t, get(t, c, VolcanoHyperNode, "", "train-sp2"))
	assert.Nil(t, get(t, c, VolcanoHyperNode, "", "train-sp2-r1"))
}

func TestVolcanoWritesNoHyperNodesUnderLabelDiscovery(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "volcano-system", Name: "volcano-controller-configmap"},
		Data: map[string]string{VolcanoDiscoveryKey: "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config: {}\n"}}
	c := volcanoClient(topoNode("n1", "sp1", "r1"))
	pool := volcanoPool()
	pool.Spec.Topology = &v1alpha1.TopologySpec{Levels: []string{"example.com/superpod"}}
	st, err := Volcano{Client: c}.Sync(context.Background(), pool, capacity24, nil, false)
	require.NoError(t, err)
	require.Equal(t, int32(1), st.HyperNodes)
	require.NoError(t, c.Create(context.Background(), cm))
	st, err = Volcano{Client: c}.Sync(context.Background(), pool, capacity24, nil, false)
	require.NoError(t, err)
	assert.Equal(t, int32(0), st.HyperNodes)
	assert.Contains(t, st.HyperNodesSkipped, "source: label")
	assert.Nil(t, get(t, c, VolcanoHyperNode, "", "train-sp1"), "the pool's HyperNode stayed beside Volcano's discovery")
}

func TestLabelDiscoveryIn(t *testing.T) {
	for conf, want := range map[string]bool{
		"": false,
		"networkTopologyDiscovery:\n- source: label\n  enabled: true\n":                                 true,
		"networkTopologyDiscovery:\n- source: label\n  enabled: false\n":                                false,
		"networkTopologyDiscovery:\n- source: ufm\n  enabled: true\n":                                   false,
		"networkTopologyDiscovery:\n- source: ufm\n  enabled: true\n- source: label\n  enabled: true\n": true,
		"networkTopologyDiscovery: [":                                                                   true, // unreadable: write nothing rather than fight it
	} {
		assert.Equal(t, want, LabelDiscoveryIn(conf), conf)
	}
}
