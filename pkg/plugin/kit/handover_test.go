package kit

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestHandOverChoose(t *testing.T) {
	renewed := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	kube := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: ControllerLease, Namespace: "ns"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("w-0"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: renewed}}})
	for _, tc := range []struct {
		name      string
		args      []string
		now       time.Time
		inCluster bool
		asked     bool
		whyNot    string
	}{
		{"a fresh Lease: handed over", nil, renewed.Add(5 * time.Second), true, false, ""},
		{"an expired Lease: done here", nil, renewed.Add(15 * time.Second), false, false, "no litepool controller holds Lease ns/litepool-controller"},
		{"--in-cluster=false wins", []string{"--in-cluster=false"}, renewed, false, false, "--in-cluster=false"},
		{"--in-cluster is asked for", []string{"--in-cluster"}, renewed.Add(time.Hour), true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := HandOver{}
			cmd := &cobra.Command{Use: "x"}
			h.AddFlags(cmd, "in cluster", "wait")
			require.NoError(t, cmd.ParseFlags(append(tc.args, "--controller-namespace", "ns")))
			h.Choose(context.Background(), cmd, kube, tc.now)
			assert.Equal(t, tc.inCluster, h.InCluster)
			assert.Equal(t, tc.asked, h.Asked)
			if !tc.inCluster {
				assert.Equal(t, tc.whyNot, h.WhyNot())
			}
		})
	}
}
