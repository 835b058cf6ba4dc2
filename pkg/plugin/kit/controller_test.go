package kit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestControllerGoneReadsTheLeaderLease(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "litepool-controller", Namespace: "litepool-system"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
	}
	for _, tc := range []struct {
		name string
		objs []*coordinationv1.Lease
		gone bool
		why  string
	}{
		{"held and fresh", []*coordinationv1.Lease{lease("webhook-1_abc", 5*time.Second)}, false, ""},
		{"expired: the leader died", []*coordinationv1.Lease{lease("webhook-1_abc", 20*time.Second)}, true, "no litepool controller has renewed Lease litepool-system/litepool-controller within its 15s"},
		{"released", []*coordinationv1.Lease{lease("", time.Second)}, true, "no litepool controller has renewed Lease litepool-system/litepool-controller within its 15s"},
		{"no lease: no controller deployed", nil, true, "litepool's controller Lease litepool-system/litepool-controller is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			for _, l := range tc.objs {
				_, err := kube.CoordinationV1().Leases(l.Namespace).Create(context.Background(), l, metav1.CreateOptions{})
				assert.NoError(t, err)
			}
			gone, why := ControllerGone(context.Background(), kube, "litepool-system", now)
			assert.Equal(t, tc.gone, gone)
			assert.Equal(t, tc.why, why)
		})
	}
}
