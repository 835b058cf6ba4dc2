package kit

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// What `get` and `describe` both show: node pools, taints, a pool's type and
// accelerator, written the same way in a table and in a description.

// NodePoolRow is one node pool: declared in a pool's spec, or seen only as node labels.
type NodePoolRow struct {
	Pool    string
	Name    string
	Defined bool
	Labels  map[string]string
	Taints  []corev1.Taint
	Nodes   []*inventory.Node
}

// NodePoolRows gathers node pools from Pool specs and node labels, by pool then name.
func NodePoolRows(pools []v1alpha1.Pool, nodes []*inventory.Node) []NodePoolRow {
	type key struct{ pool, name string }
	rows := map[key]*NodePoolRow{}
	for _, p := range pools {
		for _, np := range p.Spec.NodePools {
			rows[key{p.Name, np.Name}] = &NodePoolRow{Pool: p.Name, Name: np.Name, Defined: true, Labels: np.Labels, Taints: np.Taints}
		}
	}
	for _, n := range nodes {
		if n.NodePool == "" {
			continue
		}
		k := key{n.Pool, n.NodePool}
		r := rows[k]
		if r == nil {
			r = &NodePoolRow{Pool: n.Pool, Name: n.NodePool}
			rows[k] = r
		}
		r.Nodes = append(r.Nodes, n)
	}
	out := make([]NodePoolRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pool != out[j].Pool {
			return out[i].Pool < out[j].Pool
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Figures are the node pool's phase and accelerator figures, counted as for pools: used
// and free count the nodes the total counts (the Ready ones).
func (r *NodePoolRow) Figures() (phase string, total, used int64) {
	states := make([]policy.NodeState, len(r.Nodes))
	for i, n := range r.Nodes {
		states[i] = n.State
		if n.Ready {
			total += n.Total
			used += n.Used
		}
	}
	return policy.PoolPhase(states), total, used
}

// LabelsCell is the node pool's labels as k=v,...; "<labels only>" for a node pool no
// pool declares.
func (r *NodePoolRow) LabelsCell() string {
	if !r.Defined {
		return "<labels only>"
	}
	keys := SortedKeys(r.Labels)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + r.Labels[k]
	}
	return None(strings.Join(parts, ","))
}

// TaintsCell is the node pool's taints as kubectl writes them; "<labels only>" for a
// node pool no pool declares.
func (r *NodePoolRow) TaintsCell() string {
	if !r.Defined {
		return "<labels only>"
	}
	return JoinOrNone(TaintStrings(r.Taints))
}

// TaintStrings writes taints as kubectl does: key=value:Effect.
func TaintStrings(taints []corev1.Taint) []string {
	out := make([]string, len(taints))
	for i, t := range taints {
		out[i] = t.ToString()
	}
	return out
}

// PoolTypeCell is a pool's type: Training when unset, "<no pool object>" for a pool
// that exists only as node labels.
func PoolTypeCell(p *v1alpha1.Pool) string {
	if !HasObject(p) {
		return "<no pool object>"
	}
	if p.Spec.Type == "" {
		return string(v1alpha1.PoolTypeTraining)
	}
	return string(p.Spec.Type)
}

// AcceleratorCell is a pool's accelerator model: the declared one, else the models its
// nodes report.
func AcceleratorCell(p *v1alpha1.Pool) string {
	if p.Spec.Accelerator.Type != "" {
		return p.Spec.Accelerator.Type
	}
	return JoinOrNone(p.Status.GPUTypes)
}
