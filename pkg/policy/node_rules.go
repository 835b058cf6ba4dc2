package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// NodeCatalog answers what the node rules ask: the pools, and the workload pods a node
// runs. Implementations do no I/O per call.
type NodeCatalog interface {
	PoolCatalog
	// WorkloadPods lists "namespace/name" of the workload pods bound to node (not
	// DaemonSet, not mirror, not terminal), sorted.
	WorkloadPods(node string) []string
}

// DepartureCounter is a NodeCatalog that knows the departures already granted (the
// webhook's reservation) and counts a pool's remaining members, all and Ready ones, with
// RemainingAfterDeparture; a catalog without it counts its own members minus one, all
// taken as Ready.
type DepartureCounter interface {
	RemainingAfter(pool, node string) (members, ready int)
}

// Force is a use of the runwhere.ai/force annotation: who overrode rule N3, why, and the
// denial they overrode.
type Force struct {
	By, Reason string
	Overrode   string
}

// NodeDecision is what admission answers for a node besides the denial.
type NodeDecision struct {
	Warnings []string
	// Forced is set when N3 would have denied and runwhere.ai/force overrode it.
	Forced *Force
}

// ParseForce reads a runwhere.ai/force value, "<who>: <why>": both parts are needed so
// that the audit log says who overrode a rule and why.
func ParseForce(v string) (who, why string, err error) {
	who, why, ok := strings.Cut(v, ":")
	who, why = strings.TrimSpace(who), strings.TrimSpace(why)
	if !ok || who == "" || why == "" {
		return "", "", Violationf("N3", "annotation %s=%q does not say who forces and why: write it as \"<who>: <why>\" (e.g. \"alice: replacing a failed PSU\")", AnnotationForce, v)
	}
	return who, why, nil
}

// CheckNodeLabels is rule N1 over a node create (old nil) or update: every label that is
// added or changes value must be a registered runwhere.ai/ key (not an unprefixed
// look-alike) with a valid value. Labels the update leaves as they were are not judged
// again, so one bad label does not block unrelated updates.
func CheckNodeLabels(node, old *corev1.Node) error {
	var oldLabels map[string]string
	if old != nil {
		oldLabels = old.Labels
	}
	var errs []error
	for _, k := range sortedMapKeys(node.Labels) {
		v := node.Labels[k]
		if prev, ok := oldLabels[k]; ok && prev == v {
			continue
		}
		if err := ValidateLabel(k, v); err != nil {
			errs = append(errs, withSuffix(err, fmt.Sprintf(" (node %q)", node.Name)))
		}
	}
	return errors.Join(errs...)
}

// AdmitNode runs the node rules on a create (old nil), an update, or a delete (node nil,
// old the node being deleted): N1 on its labels, N2 when it joins a pool or changes its
// accelerator model inside one, N3 when it leaves a pool or is deleted from one. An N3
// denial gives way to a well-formed runwhere.ai/force annotation on the node; the
// decision then carries the override for the audit log and a warning for the client.
func AdmitNode(node, old *corev1.Node, pools NodeCatalog) (NodeDecision, error) {
	var d NodeDecision
	var errs []error
	if node != nil {
		errs = append(errs, CheckNodeLabels(node, old), checkForceFormat(node, old), checkJoin(node, old, pools, &d))
	}
	leave, leaveErr := checkLeave(node, old, pools)
	if leaveErr != nil {
		carrier := node
		if carrier == nil {
			carrier = old
		}
		if v, ok := carrier.Annotations[AnnotationForce]; ok {
			if who, why, err := ParseForce(v); err == nil {
				d.Forced = &Force{By: who, Reason: why, Overrode: leaveErr.Error()}
				d.Warnings = append(d.Warnings, fmt.Sprintf("[N3] forced by %s (%s) through %s; overridden: %s; remove the annotation when done (kubectl annotate node %s %s-)",
					who, why, AnnotationForce, messageOf(leaveErr), carrier.Name, AnnotationForce))
				leaveErr = nil
			}
		}
	}
	errs = append(errs, leaveErr)
	if leave != nil && leave.Dissolves() && leaveErr == nil {
		d.Warnings = append(d.Warnings, DissolvedWarning(leave.PoolName, leave.Node))
	}
	return d, errors.Join(errs...)
}

// checkForceFormat refuses a runwhere.ai/force annotation set without who and why.
func checkForceFormat(node, old *corev1.Node) error {
	v, ok := node.Annotations[AnnotationForce]
	if !ok || (old != nil && old.Annotations[AnnotationForce] == v) {
		return nil
	}
	_, _, err := ParseForce(v)
	return err
}

// checkJoin is rule N2 for a node that enters a pool, or changes its accelerator model
// while in one. A pool made only of labels takes the one model its members share
// (compared by model, PoolInfo.AcceleratorType).
func checkJoin(node, old *corev1.Node, pools NodeCatalog, d *NodeDecision) error {
	name := node.Labels[LabelPool]
	if name == "" || name == DefaultPool {
		return nil
	}
	oldName := ""
	if old != nil {
		oldName = old.Labels[LabelPool]
	}
	joining := name != oldName
	if !joining && GPUType(node) == GPUType(old) {
		return nil
	}
	info, ok := pools.Pool(name)
	if !ok {
		return nil // a new pool made of labels: this node founds it
	}
	p := info.Object
	if p == nil {
		if !joining && info.Members < 2 {
			return nil // a pool of labels with this node alone: its model is the node's
		}
		// A member's new model is judged against its pool's: gpuctl labels the pool and
		// the gpu-type in two requests, in either order, and the second must not let a
		// node of another model in.
		p = &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.PoolSpec{Accelerator: v1alpha1.AcceleratorSpec{Type: info.AcceleratorType()}}}
	}
	if err := CheckJoin(p, node); err != nil {
		return err
	}
	if joining && info.Object != nil {
		if err := checkDomainJoin(info.Object, node, pools); err != nil {
			return err
		}
	}
	if _, forced := node.Annotations[AnnotationForce]; forced && joining {
		d.Warnings = append(d.Warnings, fmt.Sprintf("[N3] node %q joins pool %q carrying %s: rule N3 stays overridden for it until the annotation is removed (kubectl annotate node %s %s-)",
			node.Name, name, AnnotationForce, node.Name, AnnotationForce))
	}
	return nil
}

// DepartsFrom names the pool old leaves when it becomes node (nil: deleted): its pool
// label removed or changed, or the node deleted while in a pool; "" when no pool is
// left. These are the changes that can break a pool's floor (N3).
func DepartsFrom(node, old *corev1.Node) string {
	if old == nil {
		return ""
	}
	name := old.Labels[LabelPool]
	if name == "" || name == DefaultPool || (node != nil && node.Labels[LabelPool] == name) {
		return ""
	}
	return name
}

// JoinsPool names the pool node enters (created in it, or relabelled into it from no
// pool, the default pool or another); "" when it enters none.
func JoinsPool(node, old *corev1.Node) string {
	if node == nil {
		return ""
	}
	name := node.Labels[LabelPool]
	if name == "" || name == DefaultPool || (old != nil && old.Labels[LabelPool] == name) {
		return ""
	}
	return name
}

// checkLeave is rule N3 for a node that leaves its pool (its pool label is removed or
// changed) or is deleted while in one; nil when it leaves none. Whether the departing
// node is Ready is read from old, the request's own object.
func checkLeave(node, old *corev1.Node, pools NodeCatalog) (*Leave, error) {
	name := DepartsFrom(node, old)
	if name == "" {
		return nil, nil
	}
	info, _ := pools.Pool(name)
	remaining := max(info.Members-1, 0)
	ready := remaining
	if r, ok := pools.(DepartureCounter); ok {
		remaining, ready = r.RemainingAfter(name, old.Name)
	}
	l := &Leave{Pool: info.Object, PoolName: name, Node: old.Name, NodeReady: IsNodeReady(old),
		WorkloadPods: pools.WorkloadPods(old.Name), Remaining: remaining, ReadyRemaining: ready}
	if info.Object != nil {
		l.Domain = domainLeave(info.Object, old, pools)
	}
	return l, CheckLeave(*l)
}

// DistinctSorted returns the distinct non-empty values, sorted.
func DistinctSorted(values []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range values {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}
