package kit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func handOver(t *testing.T, kube *fake.Clientset, now time.Time, args ...string) *HandOver {
	t.Helper()
	h := &HandOver{}
	cmd := &cobra.Command{Use: "x"}
	h.AddFlags(cmd, "in cluster", 10*time.Second)
	require.NoError(t, cmd.ParseFlags(append(args, "--controller-namespace", "ns")))
	h.Complete(cmd, kube, clocktesting.NewFakePassiveClock(now))
	return h
}

func TestHandOverFlags(t *testing.T) {
	kube := fake.NewClientset()
	h := handOver(t, kube, time.Now())
	assert.Equal(t, HandOver{ControllerTimeout: 10 * time.Second, ControllerNamespace: "ns"}, HandOver{InCluster: h.InCluster,
		InClusterSet: h.InClusterSet, ControllerTimeout: h.ControllerTimeout, ControllerNamespace: h.ControllerNamespace})
	h = handOver(t, kube, time.Now(), "--in-cluster=false", "--controller-timeout=2s")
	assert.True(t, h.InClusterSet)
	assert.False(t, h.InCluster)
	assert.Equal(t, 2*time.Second, h.ControllerTimeout)
}

// WaitForController reads until the controller answers, or the timeout ends it.
func TestHandOverWaitForController(t *testing.T) {
	defer func(p time.Duration) { HandOverPoll = p }(HandOverPoll)
	HandOverPoll = time.Millisecond
	h := handOver(t, fake.NewClientset(), time.Now(), "--controller-timeout=5s")
	reads := 0
	taken, err := h.WaitForController(context.Background(), func(context.Context) bool { reads++; return reads == 3 })
	require.NoError(t, err)
	assert.True(t, taken)
	assert.Equal(t, 3, reads, "it stops reading once answered")

	h.ControllerTimeout = 20 * time.Millisecond
	reads = 0
	taken, err = h.WaitForController(context.Background(), func(context.Context) bool { reads++; return false })
	require.NoError(t, err)
	assert.False(t, taken)
	assert.Greater(t, reads, 1, "it read more than once before giving up")

	h.ControllerTimeout = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	taken, err = h.WaitForController(ctx, func(context.Context) bool { return false })
	assert.False(t, taken)
	assert.ErrorIs(t, err, context.Canceled)
}

// TakeOver says once that the controller stopped; it takes over unless --in-cluster,
// never while the Lease is held or unreadable, and reads the Lease at most every
// LeaseCheckInterval.
func TestHandOverTakeOver(t *testing.T) {
	defer func(i time.Duration) { LeaseCheckInterval = i }(LeaseCheckInterval)
	renewed := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lease := func() *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: ControllerLease, Namespace: "ns"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("w-0"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	const why = "no litepool controller has renewed Lease ns/litepool-controller within its 15s"
	type answer struct {
		take bool
		why  string
	}
	for _, tc := range []struct {
		name   string
		now    time.Time
		args   []string
		lease  bool
		denied bool
		want   []answer // successive passes
	}{
		{"held", renewed.Add(5 * time.Second), nil, true, false, []answer{{}, {}}},
		{"expired: taken over, said once", renewed.Add(time.Minute), nil, true, false, []answer{{true, why}, {}}},
		{"expired, --in-cluster: said, not taken", renewed.Add(time.Minute), []string{"--in-cluster"}, true, false, []answer{{false, why}, {}}},
		{"gone", renewed, nil, false, false, []answer{{true, "litepool's controller Lease ns/litepool-controller is gone"}}},
		{"unreadable: says nothing", renewed.Add(time.Minute), nil, true, true, []answer{{}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			LeaseCheckInterval = 0
			var objs []runtime.Object
			if tc.lease {
				objs = append(objs, lease())
			}
			kube := fake.NewClientset(objs...)
			if tc.denied {
				kube.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, ControllerLease, errors.New("no"))
				})
			}
			h := handOver(t, kube, tc.now, tc.args...)
			for i, w := range tc.want {
				take, said := h.TakeOver(context.Background())
				assert.Equal(t, w, answer{take, said}, "pass %d", i+1)
			}
		})
	}

	// Within the interval the Lease is not read again.
	LeaseCheckInterval = time.Hour
	kube := fake.NewClientset(lease())
	h := handOver(t, kube, renewed.Add(5*time.Second))
	take, _ := h.TakeOver(context.Background())
	assert.False(t, take)
	require.NoError(t, kube.CoordinationV1().Leases("ns").Delete(context.Background(), ControllerLease, metav1.DeleteOptions{}))
	take, said := h.TakeOver(context.Background())
	assert.Equal(t, answer{}, answer{take, said}, "the Lease's end is seen at the next check, not before")
}
