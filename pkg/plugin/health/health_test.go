package health

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// fakePools replaces the controller-runtime client with a fake holding pool.
func fakePools(t *testing.T, pool *v1alpha1.Pool) client.Client {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool).WithStatusSubresource(&v1alpha1.Pool{}).Build()
	old := newClient
	newClient = func(kit.Factory) (client.Client, error) { return c, nil }
	t.Cleanup(func() { newClient = old })
	return c
}

func heldPool() *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Spec: v1alpha1.PoolSpec{Health: &v1alpha1.HealthPolicy{}},
		Status: v1alpha1.PoolStatus{NodeHealth: []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: policy.ReasonFlapping}}}}
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "p1"}}}
}

func healthSpec(t *testing.T, c client.Client) *v1alpha1.HealthPolicy {
	var p v1alpha1.Pool
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "p1"}, &p))
	return p.Spec.Health
}

// The order goes into the Pool's spec; the status, the loop's report, is not written.
func TestReleaseWritesTheOrderAndAnEvent(t *testing.T) {
	p := heldPool()
	p.Spec.Health.Hold = []v1alpha1.NodeHold{{Node: "n1", By: "bob"}, {Node: "n2"}}
	c := fakePools(t, p)
	f := kittest.NewFactory(t, node("n1"))
	res := kittest.Run(f, NewCmdHealth, "", "release", "n1")
	require.NoError(t, res.Err)
	assert.Equal(t, "node/n1 released (pool p1; the controller applies it)\n", res.Out)
	h := healthSpec(t, c)
	require.Len(t, h.Release, 1)
	assert.Equal(t, "n1", h.Release[0].Node)
	assert.Equal(t, "kubectl litepool", h.Release[0].By, "the fake API server knows no user")
	assert.False(t, h.Release[0].At.IsZero())
	assert.Equal(t, []v1alpha1.NodeHold{{Node: "n2"}}, h.Hold, "the node's hold is taken out")
	var got v1alpha1.Pool
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "p1"}, &got))
	assert.Equal(t, v1alpha1.NodeHealthHeldOut, got.Status.NodeHealth[0].State, "the status is the controller's")
	assert.Len(t, f.Events(t), 1)

	// A second release replaces the node's first.
	res = kittest.Run(f, NewCmdHealth, "", "release", "n1")
	require.NoError(t, res.Err)
	assert.Len(t, healthSpec(t, c).Release, 1)
}

func TestReleaseRefusesANodeThatIsNotOut(t *testing.T) {
	fakePools(t, heldPool())
	f := kittest.NewFactory(t, node("n2"))
	res := kittest.Run(f, NewCmdHealth, "", "release", "n2")
	require.Error(t, res.Err)
	assert.Equal(t, "[H1] node n2 is Healthy: only a node the health loop holds out (Quarantined, Draining, Remediating, Rechecking, Holding, HeldOut) can be released", res.Err.Error())
}

func TestHoldAndItsDryRun(t *testing.T) {
	c := fakePools(t, heldPool())
	f := kittest.NewFactory(t, node("n2"))
	res := kittest.Run(f, NewCmdHealth, "", "hold", "n2", "--reason", "fan noise", "--dry-run=client")
	require.NoError(t, res.Err)
	assert.Equal(t, "node/n2 held out (pool p1; the controller applies it) (dry run)\n", res.Out)
	assert.Empty(t, healthSpec(t, c).Hold, "a client dry run writes nothing")
	assert.Empty(t, f.Events(t))

	res = kittest.Run(f, NewCmdHealth, "", "hold", "n2", "--reason", "fan noise")
	require.NoError(t, res.Err)
	assert.Equal(t, []v1alpha1.NodeHold{{Node: "n2", Reason: "fan noise", By: "kubectl litepool"}}, healthSpec(t, c).Hold)
}

func TestHoldRefusesAPoolWithoutHealth(t *testing.T) {
	fakePools(t, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p1"}})
	f := kittest.NewFactory(t, node("n1"))
	res := kittest.Run(f, NewCmdHealth, "", "hold", "n1")
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "[H1] pool p1 has no spec.health")
}
