package policy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// MinNodes is a pool's scale-down floor: spec.minNodes, at least 1.
func MinNodes(spec v1alpha1.PoolSpec) int {
	if spec.MinNodes < 1 {
		return 1
	}
	return int(spec.MinNodes)
}

// CheckJoin is rule N2: a node may join a pool only if its accelerator model is the
// pool's, judged by what the node carries (its labels after the request that makes it
// join): every model its labels state (NodeModelStatements) must be the pool's model
// (SameGPUModel, so a10-24g joins a pool of NVIDIA-A10). A node that offers
// accelerators but states no model yet is not refused: gpuctl labels the pool and the
// gpu-type in two requests, and the gpu-type that follows is judged when it comes. A
// node that offers no accelerator and states no model is a CPU node. A pool with no
// accelerator type (a CPU pool, or one not yet pinned) takes any node.
func CheckJoin(pool *v1alpha1.Pool, node *corev1.Node) error {
	want := pool.Spec.Accelerator.Type
	if want == "" {
		return nil
	}
	bad := NodeContradicts(node, want)
	if bad == nil {
		if len(NodeModelStatements(node)) > 0 || offersAccelerators(node) {
			return nil
		}
		bad = &ModelStatement{Label: LabelGPUType, Value: "none"}
	}
	if bad.Label != LabelGPUType {
		return Violationf("N2", "node %q (its device plugin reports %s) cannot join pool %q: the pool takes only %s nodes; choose a node of model %s or a pool for %s nodes",
			node.Name, bad, pool.Name, want, want, bad.Value)
	}
	return Violationf("N2", "node %q (%s) cannot join pool %q: the pool takes only %s nodes; choose a node labelled %s=%s or a pool for %s nodes",
		node.Name, bad, pool.Name, want, LabelGPUType, want, bad.Value)
}

// Leave is what rule N3 knows of one node's departure from its pool.
type Leave struct {
	// Pool is the Pool object; nil for a pool of labels only.
	Pool     *v1alpha1.Pool
	PoolName string
	Node     string
	// NodeReady says whether the departing node holds capacity (its Ready condition is
	// True); a NotReady member may leave at the floor.
	NodeReady bool
	// WorkloadPods are "namespace/name" of the node's workload pods (not DaemonSet, not
	// terminal, not terminating).
	WorkloadPods []string
	// Remaining counts the members the pool keeps once the node has left, and
	// ReadyRemaining the Ready ones among them (RemainingAfterDeparture).
	Remaining, ReadyRemaining int
	// Domain is the unit domain a member in service leaves (nil: none is judged).
	Domain *DomainLeave
}

// Dissolves says whether the departure takes the last node of a pool of labels only:
// with no Pool object and no member left, the pool no longer exists.
func (l Leave) Dissolves() bool { return l.Pool == nil && l.Remaining <= 0 }

// CheckLeave is rule N3: a node may leave its pool (or be deleted) only when it runs no
// workload pods and, for a Pool object, the pool keeps at least minNodes Ready members.
// The floor counts capacity, as Pool status does: a NotReady member holds none, so it
// may leave at the floor (the Node of a dead machine stays deletable). A pool of labels
// only declares no floor: its last idle node may leave, and the pool is gone
// (Leave.Dissolves).
func CheckLeave(l Leave) error {
	if len(l.WorkloadPods) > 0 {
		return reasonViolationf("N3", ReasonBusyNode, "node %q cannot leave pool %q: it runs %d workload pod(s) (%s); drain it first (kubectl litepool drain %s) or wait for them to finish",
			l.Node, l.PoolName, len(l.WorkloadPods), summarize(l.WorkloadPods, 3), l.Node)
	}
	if l.Pool == nil || !l.NodeReady {
		return nil
	}
	if floor := MinNodes(l.Pool.Spec); l.ReadyRemaining < floor {
		return Violationf("N3", "node %q cannot leave pool %q: the pool would have %d Ready node(s), below its minNodes %d; lower spec.minNodes first or add a node (a NotReady member may leave)",
			l.Node, l.PoolName, l.ReadyRemaining, floor)
	}
	return checkDomainLeave(l)
}

// DissolvedWarning is what a client is told when its request takes the last node of a
// pool of labels only.
func DissolvedWarning(pool, node string) string {
	return fmt.Sprintf("[N3] node %q was the last node of pool %q, a pool of labels only (no Pool object): the pool is gone; label a node %s=%s to make it again, or create a Pool object to give it a floor (minNodes)",
		node, pool, LabelPool, pool)
}

// RemainingAfterDeparture is N3's floor arithmetic under concurrent departures: the
// members pool keeps once node leaves, counting neither node nor the departures already
// granted (members is who the caller's cache sees labelled with the pool; granted are
// the nodes whose departure was reserved and may or may not have committed yet, so a
// granted node the cache still shows is not counted twice).
func RemainingAfterDeparture(members []string, granted map[string]bool, node string) int {
	n := 0
	for _, m := range members {
		if m != node && !granted[m] {
			n++
		}
	}
	return n
}

// CheckPoolDelete is rule R2: a pool may be deleted only when no workload pods run on
// its nodes, unless the deletion is confirmed explicitly (the plugin's --force, or the
// annotation runwhere.ai/confirm-delete=<pool name> on the Pool object).
func CheckPoolDelete(pool *v1alpha1.Pool, workloadPods []string) error {
	if len(workloadPods) == 0 || DeleteConfirmed(pool) {
		return nil
	}
	return Violationf("R2", "pool %q cannot be deleted: %d workload pod(s) run on its nodes (%s); wait for them to finish, or confirm with the annotation %s=%s (kubectl litepool delete pool %s --force), which leaves the pods running",
		pool.Name, len(workloadPods), summarize(workloadPods, 3), AnnotationConfirmDelete, pool.Name, pool.Name)
}

// DeleteConfirmed says whether a Pool carries the deletion confirmation for itself.
func DeleteConfirmed(pool *v1alpha1.Pool) bool {
	return pool.Annotations[AnnotationConfirmDelete] == pool.Name
}

func summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
