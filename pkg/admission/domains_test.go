package admission

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

const superPodLabel = "huawei.com/topotree.superpodid"

// superNodeOf is member i of pool rack in super node sp-(i/4).
func superNodeOf(i int) *corev1.Node {
	n := testNode(fmt.Sprintf("rack-%d", i), "A100-80G", "rack")
	n.Labels[superPodLabel] = fmt.Sprintf("sp-%d", i/4)
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	return n
}

// TestDomainDeparturesConcurrent: the 4 members of super node sp-0 (minNodesPerDomain 2)
// all ask to leave at once, judged from a cache that sees none of the others go; the
// pool's reservation serialises them, so exactly 2 are granted.
func TestDomainDeparturesConcurrent(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	objs := []client.Object{&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "rack"}, Spec: v1alpha1.PoolSpec{MinNodes: 1,
		Topology: &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2}}}}
	for i := range 8 {
		objs = append(objs, superNodeOf(i))
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	for _, ix := range Indexes {
		b = b.WithIndex(ix.Obj, ix.Field, ix.Extract)
	}
	c := b.Build()
	deps := &Departures{Client: c, Namespace: "litepool-system", TTL: time.Minute}
	h := &NodeHandler{Catalog: Catalog{Reader: c}, Departures: deps}
	var mu sync.Mutex
	var allowed, denied int
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			old := superNodeOf(i)
			op, node := admissionv1.Delete, (*corev1.Node)(nil)
			if i%2 == 0 {
				op, node = admissionv1.Update, old.DeepCopy()
				delete(node.Labels, policy.LabelPool)
			}
			resp := review(t, h, nodeRequest(t, op, node, old))
			mu.Lock()
			defer mu.Unlock()
			if resp.Allowed {
				allowed++
			} else {
				assert.Contains(t, resp.Result.Message, "below minNodesPerDomain 2")
				denied++
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 2, allowed)
	assert.Equal(t, 2, denied)
	got, err := deps.GrantedNodes(context.Background(), "rack")
	require.NoError(t, err)
	assert.Len(t, got, 2)

	// A member of another specification may not join sp-1; a node of sp-1's may.
	for _, tc := range []struct {
		gpus string
		ok   bool
	}{{"8", true}, {"4", false}} {
		node := superNodeOf(4)
		node.Name = "joiner-" + tc.gpus
		node.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(tc.gpus)}
		old := node.DeepCopy()
		delete(old.Labels, policy.LabelPool)
		resp := review(t, h, nodeRequest(t, admissionv1.Update, node, old))
		assert.Equal(t, tc.ok, resp.Allowed, "%s GPUs: %v", tc.gpus, resp.Result)
	}
}
