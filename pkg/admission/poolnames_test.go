package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// countingReader counts the node lists it serves.
type countingReader struct {
	*indexerReader
	nodeLists int
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.NodeList); ok {
		r.nodeLists++
	}
	return r.indexerReader.List(ctx, list, opts...)
}

// plainReader hides GetInformer: a reader with no informer behind it.
type plainReader struct{ client.Reader }

func poolNamesFixture() *indexerReader {
	r := newIndexerReader()
	r.add(&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}})
	r.add(testNode("a100-1", "A100", "train-a100"), testNode("a10-1", "A10", "dev-labels"),
		testNode("a10-2", "A10", "dev-labels"), testNode("spare", "A10", ""))
	return r
}

func TestPoolNamesReadTheIndexNotTheNodes(t *testing.T) {
	r := &countingReader{indexerReader: poolNamesFixture()}
	names := Catalog{Reader: r}.forRequest(context.Background()).PoolNames()
	assert.Equal(t, []string{"dev-labels", "train-a100"}, names)
	assert.Zero(t, r.nodeLists, "a P2 denial must not copy every node")
}

func TestPoolNamesWithoutAnInformerListTheNodes(t *testing.T) {
	names := Catalog{Reader: plainReader{poolNamesFixture()}}.forRequest(context.Background()).PoolNames()
	assert.Equal(t, []string{"dev-labels", "train-a100"}, names)
}

func TestPoolsOfIndexKeys(t *testing.T) {
	// controller-runtime's cache keys a cluster-scoped node's pool as
	// "__all_namespaces/<pool>" (seen in test/e2e/demo's P2 denial before this).
	assert.Equal(t, []string{"infer-a10", "train-a100", "dev"},
		poolsOfIndexKeys([]string{"__all_namespaces/infer-a10", "__all_namespaces/train-a100", "dev", "ns/ignored"}))
}
