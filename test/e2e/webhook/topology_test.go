package webhook

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// TestPoolTopologyR1: each bad spec.topology of issue 40 is refused through `kubectl
// apply` with the webhook running, with an error naming the field and what is
// accepted, and changes nothing: the stored Pool (a flat pool of 3 nodes, super pods
// sp1 of 2 and sp2 of 1) keeps its spec. The CRD's schema refuses the first two
// itself (enum, maxItems); the webhook the rest, reading the domains from its cache.
func TestPoolTopologyR1(t *testing.T) {
	c := framework.C
	kube := c.Kube
	crt := newCerts(t)
	proc, _ := startWebhook(t, crt)
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))

	const pool = "topo-a100"
	for i, sp := range []string{"sp1", "sp1", "sp2"} {
		_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("topo-node-%d", i),
			Labels: map[string]string{policy.LabelPool: pool, policy.LabelGPUType: "A100-80G",
				"huawei.com/topotree.superpodid": sp, "huawei.com/topotree.rackid": "rack-1"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	manifest := func(topology string) string {
		return fmt.Sprintf(`apiVersion: runwhere.ai/v1alpha1
kind: Pool
metadata:
  name: %s
spec:
  type: Training
  accelerator: {type: A100-80G}
%s`, pool, topology)
	}
	r := c.Kubectl(t, manifest(""), "apply", "-f", "-")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	pools := poolclient.New(c.Dynamic)
	t.Cleanup(func() {
		_ = pools.Delete(ctx, pool, metav1.DeleteOptions{})
		for i := range 3 {
			_ = kube.CoreV1().Nodes().Delete(ctx, fmt.Sprintf("topo-node-%d", i), metav1.DeleteOptions{})
		}
	})
	before, err := pools.Get(ctx, pool)
	require.NoError(t, err)

	for _, tc := range []struct{ name, topology, stderr string }{
		{"unknown preset", "  topology: {preset: Cray}",
			`spec.topology.preset: Unsupported value: "Cray": supported values: "Ascend", "NVIDIA", "GKE", "EKS", "Topograph"`},
		{"more than Kueue's 16 levels", "  topology: {levels: [l1, l2, l3, l4, l5, l6, l7, l8, l9, l10, l11, l12, l13, l14, l15, l16]}",
			`spec.topology.levels: Too many: 16: must have at most 15 items`},
		{"duplicate levels", "  topology: {levels: [block, rack, block]}",
			denied("pools.runwhere.ai", `[R1] level "block" is listed twice: each level is a different node label key`)},
		{"hostname not last", "  topology: {levels: [kubernetes.io/hostname, rack]}",
			denied("pools.runwhere.ai", `[R1] kubernetes.io/hostname may only be the last level (it is implied last): remove it or move it to the end`)},
		{"a floor above a domain's size", "  topology: {preset: Ascend, minNodesPerDomain: 2}",
			denied("pools.runwhere.ai", `[R1] spec.topology.minNodesPerDomain 2 is above the members of domain "sp2" (1) of huawei.com/topotree.superpodid: a domain keeps at least that many while it stays in the pool; set it to 1 or less, or add members to those domains first`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Kubectl(t, manifest(tc.topology), "apply", "-f", "-")
			assert.Equal(t, 1, r.ExitCode)
			assert.Contains(t, r.Stderr, tc.stderr)
			after, err := pools.Get(ctx, pool)
			require.NoError(t, err)
			assert.Equal(t, before.Spec, after.Spec, "nothing changed")
			assert.Equal(t, before.ResourceVersion, after.ResourceVersion)
		})
	}
	t.Run("a floor every domain holds is accepted", func(t *testing.T) {
		r := c.Kubectl(t, manifest("  topology: {preset: Ascend, minNodesPerDomain: 1}"), "apply", "-f", "-")
		require.Equal(t, 0, r.ExitCode, r.Stderr)
		after, err := pools.Get(ctx, pool)
		require.NoError(t, err)
		assert.EqualValues(t, 1, after.Spec.Topology.MinNodesPerDomain)
	})
}
