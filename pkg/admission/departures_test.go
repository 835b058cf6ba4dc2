package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// floorCluster is a pool of n idle nodes with minNodes floor, and its departures.
func floorCluster(t *testing.T, n, floor int, now func() time.Time) (Catalog, *Departures) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	objs := []client.Object{&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{MinNodes: int32(floor)}}}
	for i := range n {
		objs = append(objs, testNode(fmt.Sprintf("a100-node-%d", i), "A100-80G", "train-a100"))
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	for _, ix := range Indexes {
		b = b.WithIndex(ix.Obj, ix.Field, ix.Extract)
	}
	c := b.Build()
	return Catalog{Reader: c}, &Departures{Client: c, Namespace: "litepool-system", TTL: time.Minute, Now: now}
}

// TestDeparturesConcurrent: every member asks to leave at once, judged from a cache that
// sees none of the others go (the race the reservation closes); exactly n-floor are
// granted.
func TestDeparturesConcurrent(t *testing.T) {
	const n, floor = 8, 2
	cat, deps := floorCluster(t, n, floor, nil)
	h := &NodeHandler{Catalog: cat, Departures: deps}
	var mu sync.Mutex
	var allowed, denied int
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			old := testNode(fmt.Sprintf("a100-node-%d", i), "A100-80G", "train-a100")
			op, node := admissionv1.Delete, (*corev1.Node)(nil)
			if i%2 == 0 { // half remove the label, half delete the node
				op, node = admissionv1.Update, old.DeepCopy()
				delete(node.Labels, policy.LabelPool)
			}
			resp := review(t, h, nodeRequest(t, op, node, old))
			mu.Lock()
			defer mu.Unlock()
			if resp.Allowed {
				allowed++
			} else {
				assert.Contains(t, resp.Result.Message, "below its minNodes 2")
				denied++
			}
		})
	}
	wg.Wait()
	assert.Equal(t, n-floor, allowed)
	assert.Equal(t, floor, denied)
	got, err := deps.GrantedNodes(context.Background(), "train-a100")
	require.NoError(t, err)
	assert.Len(t, got, n-floor)
}

// TestDeparturesIdempotentDryRunExpiry: a retried departure is granted again without a
// second entry, a dry run reserves nothing, and grants expire after the TTL.
func TestDeparturesIdempotentDryRunExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cat, deps := floorCluster(t, 3, 2, func() time.Time { return now })
	h := &NodeHandler{Catalog: cat, Departures: deps}
	leave := func(name string, dry bool) *admissionv1.AdmissionResponse {
		req := nodeRequest(t, admissionv1.Delete, nil, testNode(name, "A100-80G", "train-a100"))
		req.DryRun = ptr.To(dry)
		return review(t, h, req)
	}
	granted := func() []string {
		g, err := deps.GrantedNodes(context.Background(), "train-a100")
		require.NoError(t, err)
		return g
	}
	assert.True(t, leave("a100-node-0", true).Allowed)
	assert.Empty(t, granted(), "a dry run reserves nothing")
	assert.True(t, leave("a100-node-0", false).Allowed)
	assert.True(t, leave("a100-node-0", false).Allowed, "a retry of a granted departure")
	assert.Equal(t, []string{"a100-node-0"}, granted())
	resp := leave("a100-node-1", true)
	assert.False(t, resp.Allowed, "a dry run is judged against the grants")
	assert.Equal(t, `[N3] node "a100-node-1" cannot leave pool "train-a100": the pool would have 1 Ready node(s), below its minNodes 2; lower spec.minNodes first or add a node (a NotReady member may leave)`, resp.Result.Message)

	now = now.Add(2 * time.Minute) // node-0 never left (its label is still in the cache)
	assert.Empty(t, granted(), "an expired grant no longer counts")
	assert.True(t, leave("a100-node-1", false).Allowed)
	var cm corev1.ConfigMap
	require.NoError(t, deps.Client.Get(context.Background(), client.ObjectKey{Namespace: "litepool-system", Name: "litepool-departures-train-a100"}, &cm))
	assert.Equal(t, []string{"a100-node-1"}, keys(cm.Data), "expired grants are pruned on write")
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConfigMapName(t *testing.T) {
	assert.Equal(t, "litepool-departures-train-a100", ConfigMapName("train-a100"))
	odd := ConfigMapName("GPU_Pool")
	assert.Regexp(t, `^litepool-departures-x[0-9a-f]{16}$`, odd)
	assert.NotEqual(t, odd, ConfigMapName("GPU_Pool2"))
}

// TestDepartureFailsClosed: a departure whose reservation cannot be read is refused
// (its webhook's failure policy is Fail), unlike other node requests.
func TestDepartureFailsClosed(t *testing.T) {
	cat, deps := floorCluster(t, 4, 1, nil)
	deps.Client = interceptor.NewClient(deps.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				return errors.New("etcd is on fire")
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	h := &NodeHandler{Catalog: cat, Departures: deps}
	resp := review(t, h, nodeRequest(t, admissionv1.Delete, nil, testNode("a100-node-0", "A100-80G", "train-a100")))
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(500), resp.Result.Code)
	assert.Contains(t, resp.Result.Message, `could not reserve the departure of node "a100-node-0" from pool "train-a100"`)
	assert.Contains(t, resp.Result.Message, "etcd is on fire")
}

// TestDepartureGrantReleasedWhenTheNodeRejoins: a node that left and came back within
// the TTL counts as a member again at once; before, its stale grant kept it out of the
// count and refused the pool's next departures ("would have 0 node(s)") until it expired.
func TestDepartureGrantReleasedWhenTheNodeRejoins(t *testing.T) {
	cat, deps := floorCluster(t, 3, 2, nil)
	h := &NodeHandler{Catalog: cat, Departures: deps}
	member := testNode("a100-node-0", "A100-80G", "train-a100")
	outside := member.DeepCopy()
	delete(outside.Labels, policy.LabelPool)

	require.True(t, review(t, h, nodeRequest(t, admissionv1.Update, outside, member)).Allowed, "leave")
	granted, err := deps.GrantedNodes(context.Background(), "train-a100")
	require.NoError(t, err)
	require.Equal(t, []string{"a100-node-0"}, granted)

	// The cache still shows node-0 as a member (it rejoined): the departure of another
	// node must be judged with node-0 counted.
	require.True(t, review(t, h, nodeRequest(t, admissionv1.Update, member, outside)).Allowed, "rejoin")
	granted, err = deps.GrantedNodes(context.Background(), "train-a100")
	require.NoError(t, err)
	assert.Empty(t, granted, "the rejoin released the grant")

	other := testNode("a100-node-1", "A100-80G", "train-a100")
	assert.True(t, review(t, h, nodeRequest(t, admissionv1.Delete, nil, other)).Allowed, "3 members, floor 2: one may go")
}

// A grant that keeps losing its race retries until the request's time is up (not for a
// fixed count, which starved a contender under 8 concurrent departures), then answers
// with the last conflict; nothing is recorded.
func TestDepartureRetriesUntilTheRequestEnds(t *testing.T) {
	_, deps := floorCluster(t, 4, 1, nil)
	tries := 0
	deps.Client = interceptor.NewClient(deps.Client.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			tries++
			return apierrors.NewAlreadyExists(corev1.Resource("configmaps"), obj.GetName())
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := deps.Grant(ctx, "train-a100", "a100-node-0", false, func(map[string]bool) error { return nil })
	require.Error(t, err)
	assert.True(t, apierrors.IsAlreadyExists(err), "the last conflict: %v", err)
	assert.Greater(t, tries, 40, "tried for as long as the request lasts")
	var cms corev1.ConfigMapList
	require.NoError(t, deps.Client.List(context.Background(), &cms))
	assert.Empty(t, cms.Items)
}

// A review no API server sent (anyone who reaches the Service can post one) reserves
// nothing: a node the cache does not hold, a node of another uid, a pool that does not
// exist. A safe departure after them is still granted.
func TestForgedDeparturesReserveNothing(t *testing.T) {
	cat, deps := floorCluster(t, 3, 2, nil)
	h := &NodeHandler{Catalog: cat, Departures: deps}
	forged := func(name, pool string) *corev1.Node {
		n := testNode(name, "A100-80G", pool)
		n.UID = "forged-uid"
		n.Annotations = map[string]string{policy.AnnotationForce: "mallory: forged"}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		return n
	}
	for _, n := range []*corev1.Node{forged("a100-node-0", "train-a100"), forged("a100-node-1", "train-a100"), forged("ghost", "no-such-pool")} {
		resp := review(t, h, nodeRequest(t, admissionv1.Delete, nil, n))
		assert.False(t, resp.Allowed, n.Name)
		assert.Contains(t, resp.Result.Message, "nothing was reserved")
	}
	granted, err := deps.GrantedNodes(context.Background(), "train-a100")
	require.NoError(t, err)
	assert.Empty(t, granted)
	var cm corev1.ConfigMap
	err = deps.Client.Get(context.Background(), client.ObjectKey{Namespace: deps.Namespace, Name: ConfigMapName("no-such-pool")}, &cm)
	assert.True(t, apierrors.IsNotFound(err), "no ConfigMap for a pool that does not exist: %v", err)
	assert.True(t, review(t, h, nodeRequest(t, admissionv1.Delete, nil, testNode("a100-node-2", "A100-80G", "train-a100"))).Allowed, "3 members, floor 2: one may go")
}
