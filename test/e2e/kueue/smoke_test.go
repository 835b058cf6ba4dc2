package kueue

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKueueAdmitsAPlainJob: the harness runs Kueue for real. A flavor, ClusterQueue and
// LocalQueue made by hand (no Pool involved): a Job naming the LocalQueue is created
// suspended by Kueue's webhook, admitted by its scheduler, unsuspended with the flavor's
// node labels, and its pods run on the flavor's nodes.
func TestKueueAdmitsAPlainJob(t *testing.T) {
	nodes := gpuNodes(t, "smoke", 2, 8, map[string]string{"e2e.litepool/kueue-smoke": "yes"})
	createNamespace(t, "kueue-smoke", nil)
	createObject(t, flavors, "", map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": "smoke"},
		"spec":     map[string]any{"nodeLabels": map[string]any{"e2e.litepool/kueue-smoke": "yes"}}})
	createObject(t, clusterQueues, "", map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": "smoke"},
		"spec": map[string]any{"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{"coveredResources": []any{string(gpu)},
				"flavors": []any{map[string]any{"name": "smoke",
					"resources": []any{map[string]any{"name": string(gpu), "nominalQuota": "16"}}}}}}}})
	createObject(t, localQueues, "kueue-smoke", map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "smoke", "namespace": "kueue-smoke"},
		"spec":     map[string]any{"clusterQueue": "smoke"}})

	createJob(t, gpuJob("kueue-smoke", "smoke", "smoke", 2, 8, nil, false))
	waitAdmitted(t, "kueue-smoke", "smoke")
	for _, p := range waitJobPodsRunning(t, "kueue-smoke", "smoke", 2) {
		require.Contains(t, nodes, p.Spec.NodeName, "pod %s ran off the flavor's nodes", p.Name)
		require.Equal(t, "yes", p.Spec.NodeSelector["e2e.litepool/kueue-smoke"], "Kueue injects the flavor's node labels")
	}
}
