package upgrade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func workload(name string, finished bool, assignment map[string]any) *unstructured.Unstructured {
	wl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": "ns"}, "status": map[string]any{}}}
	st := wl.Object["status"].(map[string]any)
	if assignment != nil {
		st["admission"] = map[string]any{"clusterQueue": "q", "podSetAssignments": []any{map[string]any{"name": "main", "topologyAssignment": assignment}}}
	}
	if finished {
		st["conditions"] = []any{map[string]any{"type": "Finished", "status": "True"}}
	}
	return wl
}

func TestKueueAdmissionsNamesTheNodesOfAdmittedWorkloads(t *testing.T) {
	levels := []any{"huawei.com/topotree.superpodid", "kubernetes.io/hostname"}
	individual := map[string]any{"levels": levels, "slices": []any{map[string]any{"domainCount": int64(2),
		"valuesPerLevel": []any{map[string]any{"universal": "sp-2"},
			map[string]any{"individual": map[string]any{"prefix": "pool-sp2-", "roots": []any{"1", "2"}}}},
		"podCounts": map[string]any{"universal": int64(1)}}}}
	universal := map[string]any{"levels": levels, "slices": []any{map[string]any{"domainCount": int64(1),
		"valuesPerLevel": []any{map[string]any{"universal": "sp-3"}, map[string]any{"universal": "pool-sp3-1"}},
		"podCounts":      map[string]any{"universal": int64(2)}}}}
	noHost := map[string]any{"levels": []any{"huawei.com/topotree.superpodid"}, "slices": []any{map[string]any{"domainCount": int64(1),
		"valuesPerLevel": []any{map[string]any{"universal": "sp-4"}}, "podCounts": map[string]any{"universal": int64(2)}}}}
	s := runtime.NewScheme()
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		workload("individual", false, individual), workload("universal", false, universal),
		workload("done", true, map[string]any{"levels": levels, "slices": []any{map[string]any{"domainCount": int64(1),
			"valuesPerLevel": []any{map[string]any{"universal": "sp-1"}, map[string]any{"universal": "pool-sp1-1"}}}}}),
		workload("queued", false, nil), workload("no-host-level", false, noHost)).Build()
	got, err := KueueAdmissions{Reader: c}.QueuedNodes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"pool-sp2-1": true, "pool-sp2-2": true, "pool-sp3-1": true}, got,
		"admitted, unfinished Workloads' hostnames; a finished one, one still queued and one without a hostname level name none")
}

func TestKueueAdmissionsWithoutKueue(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	got, err := KueueAdmissions{Reader: c}.QueuedNodes(context.Background())
	require.NoError(t, err, "a cluster without Kueue's Workloads has no queued nodes")
	assert.Empty(t, got)
}
