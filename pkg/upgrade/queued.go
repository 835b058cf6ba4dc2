package upgrade

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Queued says which nodes a scheduler's queue has placed admitted work on before that
// work's pods are there. A rollout that judged such a node idle from its pods alone
// could take it out the moment after the queue placed a gang on it: the gang would be
// evicted as it starts (Kueue's TAS evicts a Workload whose node is cordoned when its
// domain has no replacement) and placed on the next idle domain, which is also the one
// the rollout takes next.
type Queued interface {
	QueuedNodes(ctx context.Context) (map[string]bool, error)
}

// KueueAdmissions reads Kueue's Workloads (kueue.x-k8s.io/v1beta2): the nodes of the
// topology assignment (TAS) of every admitted Workload that has not finished. It only
// lists; a cluster without Kueue, or a controller not granted the list
// (deploy/webhook/components/kueue), has no such nodes.
type KueueAdmissions struct{ Reader client.Reader }

var workloadList = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"}

// QueuedNodes implements Queued.
func (k KueueAdmissions) QueuedNodes(ctx context.Context) (map[string]bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workloadList)
	if err := k.Reader.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, nil
		}
		return nil, err
	}
	nodes := map[string]bool{}
	for i := range list.Items {
		if wl := list.Items[i].Object; !workloadFinished(wl) {
			for _, n := range assignedNodes(wl) {
				nodes[n] = true
			}
		}
	}
	return nodes, nil
}

func workloadFinished(wl map[string]any) bool {
	conds, _, _ := unstructured.NestedSlice(wl, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Finished" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// assignedNodes are the hostnames of a Workload's topology assignments (its admission
// in status; none before it is admitted, or after an eviction clears it). Each slice
// names its domains per level, one value for all (universal) or one per domain
// (individual: prefix + root + suffix).
func assignedNodes(wl map[string]any) []string {
	psas, _, _ := unstructured.NestedSlice(wl, "status", "admission", "podSetAssignments")
	var out []string
	for _, psa := range psas {
		ta, _, _ := unstructured.NestedMap(asMap(psa), "topologyAssignment")
		levels, _, _ := unstructured.NestedStringSlice(ta, "levels")
		host := -1
		for i, l := range levels {
			if l == corev1.LabelHostname {
				host = i
			}
		}
		if host < 0 {
			continue
		}
		slices, _, _ := unstructured.NestedSlice(ta, "slices")
		for _, s := range slices {
			values, _, _ := unstructured.NestedSlice(asMap(s), "valuesPerLevel")
			if host >= len(values) {
				continue
			}
			v := asMap(values[host])
			if u, ok := v["universal"].(string); ok {
				out = append(out, u)
				continue
			}
			prefix, _, _ := unstructured.NestedString(v, "individual", "prefix")
			suffix, _, _ := unstructured.NestedString(v, "individual", "suffix")
			roots, _, _ := unstructured.NestedStringSlice(v, "individual", "roots")
			for _, r := range roots {
				out = append(out, prefix+r+suffix)
			}
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
