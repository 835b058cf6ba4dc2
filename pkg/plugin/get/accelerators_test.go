package get

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// --accelerator-resources reaches the counting: an xpu node and pod count as
// accelerators only when the set names them, as in the webhook.
func TestExtraAcceleratorsAreCountedWhenGiven(t *testing.T) {
	node := fixtures.Node("x1", "xpu-pool", "", "X1", 0, true)
	node.Status.Allocatable = corev1.ResourceList{"vendor.example/xpu": resource.MustParse("4")}
	pod := fixtures.Pod("ai", "x-0", "x1", "0", nil)
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"vendor.example/xpu": resource.MustParse("3")}

	f := kittest.NewFactory(t, node, pod)
	r := kittest.Run(f, NewCmdGet, "", "nodes", "--no-headers")
	require.NoError(t, r.Err)
	assert.Equal(t, "x1    xpu-pool   <none>   Running   X1    0     0     0\n", r.Out)

	accel, err := policy.ParseAccelerators("vendor.example/xpu")
	require.NoError(t, err)
	f.Accelerators = accel
	r = kittest.Run(f, NewCmdGet, "", "nodes", "--no-headers")
	require.NoError(t, r.Err)
	assert.Equal(t, "x1    xpu-pool   <none>   Running   X1    4     3     1\n", r.Out)
}
