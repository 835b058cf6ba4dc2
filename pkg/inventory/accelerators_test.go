package inventory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// xpuCluster is one node of a pool offering 8 vendor.example/xpu, and a pod using 3.
func xpuCluster() (*corev1.Node, *corev1.Pod) {
	xpu := corev1.ResourceName("vendor.example/xpu")
	node := gpuNode("x1", "xpu-pool", 0, true)
	node.Status.Allocatable = corev1.ResourceList{xpu: *resource.NewQuantity(8, resource.DecimalSI), "cpu": resource.MustParse("64")}
	pod := gpuPod("job", "x1", corev1.PodRunning, "0")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{xpu: resource.MustParse("3")}
	return node, pod
}

// An extra resource is counted only by an inventory told it is an accelerator, on every
// path: the builder, the scanner and the typed fallback of Collect.
func TestExtraAcceleratorCountedOnlyWhenConfigured(t *testing.T) {
	node, pod := xpuCluster()
	xpu := policy.NewAccelerators("vendor.example/xpu")
	for _, tc := range []struct {
		name        string
		accel       policy.Accelerators
		total, used int64
	}{
		{"configured", xpu, 8, 3},
		{"default set", policy.Accelerators{}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(path string, inv *Inventory) {
				p := inv.Pools["xpu-pool"]
				require.NotNil(t, p, path)
				assert.Equal(t, tc.total, p.Total, path)
				assert.Equal(t, tc.used, p.Used, path)
			}

			b := NewBuilder()
			b.Accelerators = tc.accel
			b.AddPod(pod)
			b.AddNode(node)
			check("builder", b.Build())

			for _, d := range []decoder{scanDecoder, unmarshalDecoder} {
				b := NewBuilder()
				b.Accelerators = tc.accel
				var p corev1.Pod
				_, err := listItems(encode(t, &corev1.PodList{Items: []corev1.Pod{*pod}}), func(item []byte) error {
					if err := d.pod(item, &p, map[string]string{}, tc.accel); err != nil {
						return err
					}
					b.AddPod(&p)
					return nil
				})
				require.NoError(t, err)
				var n corev1.Node
				_, err = listItems(encode(t, &corev1.NodeList{Items: []corev1.Node{*node}}), func(item []byte) error {
					if err := d.node(item, &n, tc.accel); err != nil {
						return err
					}
					b.AddNode(&n)
					return nil
				})
				require.NoError(t, err)
				check(d.name, b.Build())
			}

			inv, err := Collect(context.Background(), fake.NewClientset(node, pod), Options{Accelerators: tc.accel})
			require.NoError(t, err)
			check("Collect", inv)
		})
	}
}
