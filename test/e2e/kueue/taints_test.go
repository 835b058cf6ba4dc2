package kueue

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestQuotaLeavesOutUntoleratedTaints (issue 40 item 5): a member tainted NoSchedule or
// NoExecute by another tool, which the pool's pods do not tolerate, leaves the
// ClusterQueue's quota, as Kueue's TAS and the scheduler leave it out; the pool's own
// exclusive taint (on every member of this exclusive pool), an nvidia.com/gpu NoSchedule
// taint (ExtendedResourceToleration's) and PreferNoSchedule keep it in. Before the change
// the quota stayed 24 with the maintenance taint on.
func TestQuotaLeavesOutUntoleratedTaints(t *testing.T) {
	const pool, ns = "qtaint", "qtaint-team"
	createNamespace(t, ns, nil)
	nodes := queuePool(t, pool, 3, ns)
	waitQuota(t, pool, "24")

	setTaint := func(taint *corev1.Taint) {
		patchNode(t, nodes[0], func(n *corev1.Node) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == "example.com/maintenance" || x.Key == "nvidia.com/gpu" })
			if taint != nil {
				n.Spec.Taints = append(n.Spec.Taints, *taint)
			}
		})
	}
	// Each case moves the quota from the one before, so none passes by standing still.
	for _, tc := range []struct {
		taint corev1.Taint
		quota string
	}{
		{corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule}, "16"},
		{corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, "24"},
		{corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute}, "16"},
		{corev1.Taint{Key: "example.com/maintenance", Value: "soon", Effect: corev1.TaintEffectPreferNoSchedule}, "24"},
	} {
		setTaint(&tc.taint)
		t.Logf("%s=%s:%s: quota %s after %s", tc.taint.Key, tc.taint.Value, tc.taint.Effect, tc.quota, waitQuota(t, pool, tc.quota))
	}
	setTaint(nil)
	waitQuota(t, pool, "24")
}
