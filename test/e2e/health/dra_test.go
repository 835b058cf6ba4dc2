package health

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// A DRA driver taints a device it has seen fail (NVIDIA's turns XID errors into device
// taints): the node is quarantined for it, and the re-check runs once the driver has
// lifted the taint.
func TestDRADeviceTaintQuarantines(t *testing.T) {
	r := startController(t)
	startStressAgent(t)
	nodes := healthPool(t, "hl-dra", 4, &v1alpha1.HealthPolicy{HoldTime: seconds(2), MaxQuarantinedPercent: 50})
	n := nodes[1]
	slices := framework.C.Kube.ResourceV1().ResourceSlices()
	ctx := context.Background()
	taint := []resourcev1.DeviceTaint{{Key: "gpu.example.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "hl-dra-" + n},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &n,
			Pool:    resourcev1.ResourcePool{Name: n, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1", Taints: taint}}}}
	created, err := slices.Create(ctx, slice, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = slices.Delete(context.Background(), slice.Name, metav1.DeleteOptions{}) })

	e := waitState(t, r, "hl-dra", n, v1alpha1.NodeHealthQuarantined)
	assert.Equal(t, policy.SignalDeviceTaint, e.Reason)
	assert.Contains(t, e.Message, "gpu.example.com/"+n+"/gpu-1")
	waitTaint(t, n, true)
	for _, other := range []string{nodes[0], nodes[2], nodes[3]} {
		assert.Equal(t, v1alpha1.NodeHealthState(""), stateOf(t, "hl-dra", other), "only the tainted device's node is out")
	}

	// The driver lifts the taint (a new generation of its pool, as drivers publish).
	created.Spec.Devices[1].Taints = nil
	created.Spec.Pool.Generation = 2
	_, err = slices.Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	e = waitState(t, r, "hl-dra", n, v1alpha1.NodeHealthHealthy)
	assert.Equal(t, []v1alpha1.NodeHealthState{"Quarantined", "Rechecking", "Holding", "Healthy"}, states(e.History))
	waitTaint(t, n, false)
}
