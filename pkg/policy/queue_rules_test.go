package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func volcanoPool(q v1alpha1.QueueSpec) *v1alpha1.Pool {
	q.Scheduler = v1alpha1.QueueVolcano
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: v1alpha1.PoolSpec{Queue: &q}}
}

func TestCheckQueueRefusesWithTheFieldNamed(t *testing.T) {
	for name, tc := range map[string]struct {
		pool   *v1alpha1.Pool
		holder QueueHolder
		field  string
	}{
		"deserved above capacity":  {volcanoPool(v1alpha1.QueueSpec{Deserved: ptr.To[int64](25)}), QueueHolder{}, "spec.queue.deserved"},
		"guarantee above capacity": {volcanoPool(v1alpha1.QueueSpec{Guarantee: ptr.To[int64](25)}), QueueHolder{}, "spec.queue.guarantee"},
		"guarantee above deserved": {volcanoPool(v1alpha1.QueueSpec{Deserved: ptr.To[int64](8), Guarantee: ptr.To[int64](9)}), QueueHolder{}, "spec.queue.guarantee"},
		"Volcano with a cohort":    {volcanoPool(v1alpha1.QueueSpec{Cohort: "research"}), QueueHolder{}, "spec.queue.cohort"},
		"Volcano with shares":      {volcanoPool(v1alpha1.QueueSpec{Shares: []v1alpha1.QueueShare{{Namespace: "a"}}}), QueueHolder{}, "spec.queue.shares"},
		"Volcano with a limit":     {volcanoPool(v1alpha1.QueueSpec{BorrowingLimit: ptr.To[int64](1)}), QueueHolder{}, "spec.queue.borrowingLimit"},
		"a name another holds":     {volcanoPool(v1alpha1.QueueSpec{}), QueueHolder{Kind: "Queue", Exists: true}, "metadata.name"},
		"Kueue with deserved": {&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"},
			Spec: v1alpha1.PoolSpec{Queue: &v1alpha1.QueueSpec{Deserved: ptr.To[int64](1)}}}, QueueHolder{}, "spec.queue.deserved"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckQueue(tc.pool, nil, 24, tc.holder)
			require.Error(t, err)
			var v *Violation
			require.ErrorAs(t, err, &v)
			assert.Equal(t, "R1", v.Rule)
			assert.Equal(t, tc.field, v.Field)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestCheckQueueAdmits(t *testing.T) {
	ok := volcanoPool(v1alpha1.QueueSpec{Deserved: ptr.To[int64](24), Guarantee: ptr.To[int64](8), Resources: []v1alpha1.QueueResource{"cpu"}})
	assert.NoError(t, CheckQueue(ok, nil, 24, QueueHolder{Kind: "Queue", Exists: true, Owned: true}))
	// The capacity dropped to 16 since deserved 24 was admitted: an update that does not
	// raise it passes (the controller lowers it in the Queue); raising it does not.
	old := ok.DeepCopy()
	ok.Spec.MinNodes = 2
	assert.NoError(t, CheckQueue(ok, old, 16, QueueHolder{}))
	ok.Spec.Queue.Deserved = ptr.To[int64](25)
	assert.Error(t, CheckQueue(ok, old, 16, QueueHolder{}))
}

func TestCheckQueueSubmission(t *testing.T) {
	pool := volcanoPool(v1alpha1.QueueSpec{})
	pool.Spec.Namespaces = []string{"team-a"}
	ns := func(n string) *corev1.Namespace { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}} }
	assert.NoError(t, CheckQueueSubmission("Job", "team-a", "train", pool, ns("team-a")))
	err := CheckQueueSubmission("PodGroup", "team-b", "train", pool, ns("team-b"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[P4] PodGroup in namespace "team-b" names Volcano queue "train"`)
	// Not litepool's queue: no Pool of that name, or a pool feeding Kueue.
	assert.NoError(t, CheckQueueSubmission("Job", "team-b", "other", nil, ns("team-b")))
	kueue := pool.DeepCopy()
	kueue.Spec.Queue.Scheduler = v1alpha1.QueueKueue
	assert.NoError(t, CheckQueueSubmission("Job", "team-b", "train", kueue, ns("team-b")))
}
