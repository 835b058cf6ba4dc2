package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func TestApportion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total int64
		asks  []int64
		want  []int64
		left  int64
	}{
		{"room for all", 24, []int64{8, 4}, []int64{8, 4}, 12},
		{"exactly", 12, []int64{8, 4}, []int64{8, 4}, 0},
		{"half", 6, []int64{8, 4}, []int64{4, 2}, 0},
		// 7*8/12 = 4.67, 7*4/12 = 2.33: the larger remainder gets the unit left.
		{"largest remainder", 7, []int64{8, 4}, []int64{5, 2}, 0},
		// 1*4/8 = 0.5 each: the share listed first.
		{"tie to the first", 1, []int64{4, 4}, []int64{1, 0}, 0},
		{"nothing", 0, []int64{4, 4}, []int64{0, 0}, 0},
		{"no shares", 16, nil, nil, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, left := apportion(tc.total, tc.asks)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.left, left)
			var sum int64
			for _, g := range got {
				sum += g
			}
			assert.LessOrEqual(t, sum+left, max(tc.total, 0), "never more than the capacity")
		})
	}
}

func sharePool() *v1alpha1.Pool {
	p := queuePool()
	p.Spec.Queue.Cohort = ""
	p.Spec.Queue.Resources = []v1alpha1.QueueResource{"memory"}
	p.Spec.Queue.Shares = []v1alpha1.QueueShare{
		{Namespace: "team-a", Accelerators: 8, Memory: ptr.To(resource.MustParse("1Ti"))},
		{Namespace: "team-b", Accelerators: 4, BorrowingLimit: ptr.To[int64](0)},
	}
	return p
}

func TestSplitShrinksSharesToTheCapacity(t *testing.T) {
	c := policy.Capacity{Resource: "nvidia.com/gpu", Accelerators: 24, Memory: resource.MustParse("3Ti")}
	shares, rest := Split(sharePool(), c)
	require.Len(t, shares, 2)
	assert.Equal(t, int64(8), shares[0].Accelerators)
	assert.Equal(t, int64(4), shares[1].Accelerators)
	assert.Equal(t, int64(12), rest.Accelerators)
	assert.Equal(t, "2Ti", rest.Memory.String())
	assert.Equal(t, "train-team-a", shares[0].ClusterQueue)

	c.Accelerators, c.Memory = 6, resource.MustParse("512Gi")
	shares, rest = Split(sharePool(), c)
	assert.Equal(t, int64(4), shares[0].Accelerators)
	assert.Equal(t, int64(2), shares[1].Accelerators)
	assert.Equal(t, int64(0), rest.Accelerators)
	assert.Equal(t, "512Gi", shares[0].Memory.String(), "the only memory share takes all there is, no overflow")
	assert.True(t, rest.Memory.IsZero())
}

func TestKueueSyncWritesShares(t *testing.T) {
	c := kueueClient(true)
	pool := sharePool()
	capacity := policy.Capacity{Resource: "nvidia.com/gpu", Accelerators: 24, Memory: resource.MustParse("3Ti"), Nodes: []string{"a", "b", "c"}}
	st, err := Kueue{Client: c}.Sync(context.Background(), pool, capacity, []string{"team-a", "team-b", "team-c"}, false)
	require.NoError(t, err)
	assert.Equal(t, []v1alpha1.QueueShareStatus{{Namespace: "team-a", ClusterQueue: "train-team-a", Quota: 8},
		{Namespace: "team-b", ClusterQueue: "train-team-b", Quota: 4}}, st.Shares)
	assert.Equal(t, int64(24), st.Quota, "the pool's quota is all of it")

	own := get(t, c, KueueClusterQueue, "", "train")
	assert.Equal(t, "train", field(own, "spec", "cohortName"), "shares put the pool's queues in a cohort of the pool's name")
	assert.Equal(t, []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "12", "borrowingLimit": "4"},
		map[string]any{"name": "memory", "nominalQuota": "2Ti"}}, resources(own))
	assert.Equal(t, []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"team-c"}}},
		field(own, "spec", "namespaceSelector", "matchExpressions"), "a namespace with a share is not admitted through the pool's own queue")

	a := get(t, c, KueueClusterQueue, "", "train-team-a")
	require.NotNil(t, a)
	assert.True(t, OwnedBy(a, pool))
	assert.Equal(t, "train", field(a, "spec", "cohortName"))
	assert.Equal(t, []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8"},
		map[string]any{"name": "memory", "nominalQuota": "1Ti"}}, resources(a))
	assert.Equal(t, []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"team-a"}}},
		field(a, "spec", "namespaceSelector", "matchExpressions"))
	b := get(t, c, KueueClusterQueue, "", "train-team-b")
	assert.Equal(t, []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "0"},
		map[string]any{"name": "memory", "nominalQuota": "0"}}, resources(b))

	assert.Equal(t, "train-team-a", field(get(t, c, KueueLocalQueue, "team-a", "train"), "spec", "clusterQueue"))
	assert.Equal(t, "train-team-b", field(get(t, c, KueueLocalQueue, "team-b", "train"), "spec", "clusterQueue"))
	assert.Equal(t, "train", field(get(t, c, KueueLocalQueue, "team-c", "train"), "spec", "clusterQueue"))

	// team-b's share is taken out: its ClusterQueue goes, its LocalQueue is made anew
	// pointing at the pool's queue (Kueue's clusterQueue is immutable).
	pool.Spec.Queue.Shares = pool.Spec.Queue.Shares[:1]
	_, err = Kueue{Client: c}.Sync(context.Background(), pool, capacity, []string{"team-a", "team-b", "team-c"}, false)
	require.NoError(t, err)
	assert.Nil(t, get(t, c, KueueClusterQueue, "", "train-team-b"))
	assert.Equal(t, "train", field(get(t, c, KueueLocalQueue, "team-b", "train"), "spec", "clusterQueue"))
	assert.Equal(t, "16", resources(get(t, c, KueueClusterQueue, "", "train"))[0].(map[string]any)["nominalQuota"])

	require.NoError(t, Kueue{Client: c}.Remove(context.Background(), pool))
	assert.Nil(t, get(t, c, KueueClusterQueue, "", "train-team-a"))
}

// A share's ClusterQueue name taken by someone else's is not touched; the rest is
// written and the error names it.
func TestKueueLeavesAShareQueueItDoesNotOwn(t *testing.T) {
	theirs := &unstructured.Unstructured{}
	theirs.SetGroupVersionKind(KueueClusterQueue)
	theirs.SetName("train-team-a")
	theirs.SetLabels(map[string]string{policy.LabelPool: "train"})
	theirs.Object["spec"] = map[string]any{"cohortName": "theirs"}
	c := kueueClient(true, theirs)
	_, err := Kueue{Client: c}.Sync(context.Background(), sharePool(), capacity24, []string{"team-a", "team-b"}, false)
	require.True(t, IsNotOwned(err), "%v", err)
	assert.Equal(t, "theirs", field(get(t, c, KueueClusterQueue, "", "train-team-a"), "spec", "cohortName"))
	assert.NotNil(t, get(t, c, KueueClusterQueue, "", "train-team-b"))
	require.NoError(t, Kueue{Client: c}.Remove(context.Background(), sharePool()))
	assert.NotNil(t, get(t, c, KueueClusterQueue, "", "train-team-a"), "not the pool's: not deleted")
}

func TestAdmittedShares(t *testing.T) {
	pool := sharePool()
	pool.Spec.Queue.Shares = append(pool.Spec.Queue.Shares, v1alpha1.QueueShare{Namespace: "elsewhere", Accelerators: 2})
	nss := []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}}
	kept, skipped := AdmittedShares(pool, []string{"team-a"}, false, nss)
	assert.Equal(t, []string{"team-a"}, []string{kept[0].Namespace})
	assert.Len(t, kept, 1)
	assert.Equal(t, []string{"team-b", "elsewhere"}, skipped, "team-b does not exist; elsewhere is not admitted")
	kept, skipped = AdmittedShares(pool, nil, true, nss)
	assert.Len(t, kept, 2)
	assert.Equal(t, []string{"team-b"}, skipped)
}

func resources(cq *unstructured.Unstructured) []any {
	return field(cq, "spec", "resourceGroups").([]any)[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)
}

// A pool that admits every namespace has no LocalQueue of its own; a share's namespace
// still gets one, pointing at its share, and the pool's queue admits every namespace but
// the shares'.
func TestKueueSharesOfAPoolThatAdmitsAll(t *testing.T) {
	c := kueueClient(true)
	pool := sharePool()
	pool.Spec.Namespaces = nil
	_, err := Kueue{Client: c}.Sync(context.Background(), pool, capacity24, nil, true)
	require.NoError(t, err)
	assert.Equal(t, []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"team-a", "team-b"}}},
		field(get(t, c, KueueClusterQueue, "", "train"), "spec", "namespaceSelector", "matchExpressions"))
	assert.Equal(t, "train-team-a", field(get(t, c, KueueLocalQueue, "team-a", "train"), "spec", "clusterQueue"))
	assert.Equal(t, "train-team-b", field(get(t, c, KueueLocalQueue, "team-b", "train"), "spec", "clusterQueue"))
}
