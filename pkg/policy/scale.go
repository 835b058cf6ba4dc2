package policy

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Scale rules. Scale-up takes nodes from the default pool whose accelerator model is the
// pool's (N2); scale-down takes idle nodes first and never goes below minNodes (N3).
// S1 and S2 are the planning rules around them: where nodes come from and which go.

// AnnotationScaleDown marks a node a scale-down of the named pool has started on (it is
// cordoned, being drained or about to leave). A scale-down that stopped half-way picks
// these nodes first when it is run again, so re-running the command resumes it.
const AnnotationScaleDown = Prefix + "scale-down"

// ExclusiveTaint is the taint every member of an exclusive pool carries; only pods of
// the pool get the matching toleration.
func ExclusiveTaint(pool string) corev1.Taint {
	return corev1.Taint{Key: LabelPool, Value: pool, Effect: corev1.TaintEffectNoSchedule}
}

// CheckScaleUpCandidate is S1 for a node named with --add: it must come from the default
// pool (a node moves between pools only through it) and match the pool's accelerator (N2).
func CheckScaleUpCandidate(pool *v1alpha1.Pool, node *corev1.Node) error {
	if from := PoolOf(node); from != DefaultPool {
		if from == pool.Name {
			return Violationf("S1", "node %q is already in pool %q", node.Name, pool.Name)
		}
		return Violationf("S1", "node %q belongs to pool %q, not to the default pool: remove it from %q first (kubectl litepool scale %s --remove %s)",
			node.Name, from, from, from, node.Name)
	}
	return CheckJoin(pool, node)
}

// PlanScaleUp picks count nodes of the default pool to join pool: Running nodes (Ready,
// schedulable, healthy) whose accelerator model is the pool's, by name. It fails, naming
// what the default pool offers, when there are not enough.
func PlanScaleUp(pool *v1alpha1.Pool, nodes []*corev1.Node, count int) ([]*corev1.Node, error) {
	var fit []*corev1.Node
	var mismatched []string
	for _, n := range nodes {
		if PoolOf(n) != DefaultPool || StateOfNode(n) != NodeRunning {
			continue
		}
		if CheckJoin(pool, n) != nil {
			mismatched = append(mismatched, fmt.Sprintf("%s (%s)", n.Name, orNone(GPUType(n))))
			continue
		}
		if pool.Spec.Accelerator.Type != "" && len(NodeModelStatements(n)) == 0 {
			// N2 lets a node that states no model join (its gpu-type may follow), but a
			// pick is made only among nodes known to be of the pool's model.
			mismatched = append(mismatched, fmt.Sprintf("%s (no gpu-type)", n.Name))
			continue
		}
		fit = append(fit, n)
	}
	sort.Slice(fit, func(i, j int) bool { return fit[i].Name < fit[j].Name })
	if len(fit) >= count {
		return fit[:count], nil
	}
	want := pool.Spec.Accelerator.Type
	msg := fmt.Sprintf("pool %q needs %d more node(s) but the default pool has %d Running node(s) of gpu-type %s", pool.Name, count, len(fit), orNone(want))
	if len(fit) > 0 {
		msg += " (" + strings.Join(names(fit), ", ") + ")"
	}
	if len(mismatched) > 0 {
		sort.Strings(mismatched)
		msg += fmt.Sprintf("; these default-pool nodes do not match it: %s", summarize(mismatched, 5))
	}
	return nil, Violationf("S1", "%s; add %s nodes to the cluster or ask for fewer", msg, orNone(want))
}

// ScaleCandidate is what scale-down planning knows of a member node.
type ScaleCandidate struct {
	Name         string
	State        NodeState
	WorkloadPods int   // non-terminal pods not owned by a DaemonSet
	Used         int64 // accelerators those pods request
	Resuming     bool  // an earlier scale-down of this pool started on it
	Ready        bool  // N3 lets a Ready node leave only while minNodes Ready ones stay
}

// CheckScaleDown is N3 for a whole scale-down: going from current members to target
// must not go below minNodes.
func CheckScaleDown(pool *v1alpha1.Pool, current, target int) error {
	floor := MinNodes(pool.Spec)
	if target >= floor {
		return nil
	}
	return Violationf("N3", "pool %q cannot shrink from %d to %d node(s): its minNodes is %d; lower spec.minNodes first (kubectl litepool edit pool %s --min-nodes %d) or remove fewer nodes",
		pool.Name, current, target, floor, pool.Name, max(target, 1))
}

// PlanScaleDown picks count members to remove, in the order they should go: nodes an
// interrupted scale-down already started on, then idle nodes (no workload pods), then
// the least busy (fewest workload pods, fewest accelerators in use), nodes that are not
// Running before Running ones, and finally by name, last first (as a StatefulSet
// shrinks). The result never takes the pool below minNodes, in members or in Ready
// members: a Ready node that N3 would refuse (fewer than minNodes Ready ones would stay)
// is passed over for the next candidate, so the plan never stops half done.
func PlanScaleDown(pool *v1alpha1.Pool, members []ScaleCandidate, count int) ([]string, error) {
	if err := CheckScaleDown(pool, len(members), len(members)-count); err != nil {
		return nil, err
	}
	order := flatOrder(members)
	// Enough candidates are always left: with R Ready and U NotReady members, the check
	// above leaves count <= R+U-floor <= U + max(R-floor, 0), what may go.
	ready, floor := countReady(members), MinNodes(pool.Spec)
	out := make([]string, 0, count)
	for _, c := range order {
		if len(out) == count {
			break
		}
		if c.Ready {
			if ready-1 < floor {
				continue
			}
			ready--
		}
		out = append(out, c.Name)
	}
	return out, nil
}

// flatOrder is the order a scale-down takes members in without a topology: nodes an
// interrupted scale-down already started on, idle nodes, the least busy, nodes that are
// not Running before Running ones, then by name, last first.
func flatOrder(members []ScaleCandidate) []ScaleCandidate {
	order := append([]ScaleCandidate(nil), members...)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		switch {
		case a.Resuming != b.Resuming:
			return a.Resuming
		case (a.WorkloadPods == 0) != (b.WorkloadPods == 0):
			return a.WorkloadPods == 0
		case a.WorkloadPods != b.WorkloadPods:
			return a.WorkloadPods < b.WorkloadPods
		case a.Used != b.Used:
			return a.Used < b.Used
		case (a.State == NodeRunning) != (b.State == NodeRunning):
			return b.State == NodeRunning
		}
		return a.Name > b.Name
	})
	return order
}

func countReady(members []ScaleCandidate) int {
	n := 0
	for _, m := range members {
		if m.Ready {
			n++
		}
	}
	return n
}

// tooFewReady is N3's refusal of a scale-down that would leave fewer than minNodes Ready
// members, as the webhook would refuse its last Ready departures.
func tooFewReady(pool *v1alpha1.Pool, ready, count, notReady int) error {
	floor := MinNodes(pool.Spec)
	return Violationf("N3", "pool %q cannot lose %d node(s): it has %d Ready node(s) and minNodes %d, and a Ready node may leave only while %d Ready ones stay; remove at most %d Ready and %d NotReady node(s), or lower spec.minNodes first",
		pool.Name, count, ready, floor, floor, max(ready-floor, 0), notReady)
}

// CheckScaleDownNodes is S2 and N3 for nodes named with --remove: each must be a member
// of the pool, and the pool must keep minNodes members and minNodes Ready ones.
func CheckScaleDownNodes(pool *v1alpha1.Pool, members []ScaleCandidate, remove []string) error {
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m.Name] = true
	}
	seen := map[string]bool{}
	for _, n := range remove {
		if !isMember[n] {
			return Violationf("S2", "node %q is not a member of pool %q; its members are: %s", n, pool.Name, orNone(summarize(candidateNames(members), 10)))
		}
		if seen[n] {
			return Violationf("S2", "node %q is named twice", n)
		}
		seen[n] = true
	}
	readyRemoved := 0
	for _, m := range members {
		if m.Ready && seen[m.Name] {
			readyRemoved++
		}
	}
	if err := CheckScaleDown(pool, len(members), len(members)-len(remove)); err != nil {
		return err
	}
	if r := countReady(members); readyRemoved > 0 && r-readyRemoved < MinNodes(pool.Spec) {
		return tooFewReady(pool, r, len(remove), len(members)-r)
	}
	return nil
}

// ApplyJoin changes node as joining pool does: the pool label, the exclusive taint of
// an exclusive pool, and the accelerator model under both keys jobs select on
// (ApplyGPUTypeLabels).
func ApplyJoin(pool *v1alpha1.Pool, node *corev1.Node) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[LabelPool] = pool.Name
	if pool.Spec.Exclusive {
		SetTaint(node, ExclusiveTaint(pool.Name))
	}
	ApplyGPUTypeLabels(pool.Spec.Accelerator.Type, node)
}

// ApplyGPUTypeLabels writes a pool member's accelerator model where pods select it:
// runwhere.ai/gpu-type (kept when the node already names its model there; N2 has
// judged it the pool's) and gpuctl's runwhere.ai/gpuType with the same value, which
// gpuctl's jobs that name a GPU type select on. poolType is the pool's model, written
// when the node names none; a CPU pool's members (no model) get neither.
func ApplyGPUTypeLabels(poolType string, node *corev1.Node) {
	t := node.Labels[LabelGPUType]
	if t == "" {
		t = poolType
	}
	if t == "" {
		return
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[LabelGPUType] = t
	node.Labels[LabelGPUTypeCamel] = t
}

// ApplyLeave changes node as leaving its pool does: the pool and node-pool labels go,
// with the labels and taints its node pool gave it, any exclusive-pool taint and the
// runwhere.ai/gpuType jobs of the pool select on (the node keeps runwhere.ai/gpu-type,
// its model wherever it goes). pool may be nil for a pool that exists only as labels.
func ApplyLeave(pool *v1alpha1.Pool, node *corev1.Node) {
	if pool != nil {
		if np := FindNodePool(pool, node.Labels[LabelNodePool]); np != nil {
			ApplyNodePoolLeave(np, node)
		}
	}
	delete(node.Labels, LabelPool)
	delete(node.Labels, LabelNodePool)
	delete(node.Labels, LabelGPUTypeCamel)
	RemoveTaints(node, func(t corev1.Taint) bool { return t.Key == LabelPool })
}

// ApplyNodePool makes node a member of node pool np: the node-pool label, np's labels,
// and np's taints (replacing a taint of the same key and effect).
func ApplyNodePool(np *v1alpha1.NodePool, node *corev1.Node) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[LabelNodePool] = np.Name
	for k, v := range np.Labels {
		node.Labels[k] = v
	}
	for _, t := range np.Taints {
		SetTaint(node, t)
	}
}

// ApplyNodePoolLeave undoes ApplyNodePool: the node-pool label, np's labels (where they
// still hold np's values) and np's taints go.
func ApplyNodePoolLeave(np *v1alpha1.NodePool, node *corev1.Node) {
	delete(node.Labels, LabelNodePool)
	for k, v := range np.Labels {
		if node.Labels[k] == v {
			delete(node.Labels, k)
		}
	}
	for _, t := range np.Taints {
		RemoveTaints(node, func(have corev1.Taint) bool { return have.Key == t.Key && have.Effect == t.Effect })
	}
}

// ValidateNodePool checks a node pool's labels (N1) and taints before they are applied.
func ValidateNodePool(np *v1alpha1.NodePool) error {
	keys := make([]string, 0, len(np.Labels))
	for k := range np.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == LabelPool || k == LabelNodePool {
			return Violationf("N1", "node pool %q: label %q is set by litepool itself and cannot be a node-pool label", np.Name, k)
		}
		if err := ValidateLabel(k, np.Labels[k]); err != nil {
			return fmt.Errorf("node pool %q: %w", np.Name, err)
		}
	}
	for _, t := range np.Taints {
		if err := ValidateLabelKey(t.Key); err != nil {
			return fmt.Errorf("node pool %q: taint: %w", np.Name, err)
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return Violationf("N1", "node pool %q: taint %q has effect %q: must be NoSchedule, PreferNoSchedule or NoExecute", np.Name, t.Key, t.Effect)
		}
	}
	return nil
}

// FindNodePool returns the node pool of that name in the pool's spec, or nil.
func FindNodePool(pool *v1alpha1.Pool, name string) *v1alpha1.NodePool {
	if name == "" {
		return nil
	}
	for i := range pool.Spec.NodePools {
		if pool.Spec.NodePools[i].Name == name {
			return &pool.Spec.NodePools[i]
		}
	}
	return nil
}

// SetTaint adds t to node, replacing a taint with the same key and effect.
func SetTaint(node *corev1.Node, t corev1.Taint) {
	for i := range node.Spec.Taints {
		if have := node.Spec.Taints[i]; have.Key == t.Key && have.Effect == t.Effect {
			node.Spec.Taints[i].Value = t.Value
			return
		}
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
}

// RemoveTaints drops the node's taints that match.
func RemoveTaints(node *corev1.Node, match func(corev1.Taint) bool) {
	kept := node.Spec.Taints[:0:0]
	for _, t := range node.Spec.Taints {
		if !match(t) {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	node.Spec.Taints = kept
}

func names(nodes []*corev1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func candidateNames(cs []ScaleCandidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	sort.Strings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ValidateNodePools validates every node pool a Pool declares.
func ValidateNodePools(p *v1alpha1.Pool) error {
	for i := range p.Spec.NodePools {
		if err := ValidateNodePool(&p.Spec.NodePools[i]); err != nil {
			return err
		}
	}
	return nil
}
