package policy

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// ReasonUnbacked is the reason of a node taken out on an entry of the Pool's status
// alone: no signal on the node, no hold in spec.health, no quarantine taint. Such an
// entry is the loop's memory or a pools/status writer's claim; it is honoured only as a
// quarantine within the breaker, and only until the node's re-check.
const ReasonUnbacked = "Unbacked"

// MemoryBacking is what, besides the Pool's status, says a member is out.
type MemoryBacking struct {
	// Signalled: the node shows a health signal now.
	Signalled bool
	// Held: spec.health.hold names the node (an operator's order).
	Held bool
	// Tainted: the node carries the loop's quarantine taint, which only the controller
	// and writers of nodes put on (a pools/status writer cannot).
	Tainted bool
}

// Backed says whether anything but the Pool's status keeps the node out.
func (b MemoryBacking) Backed() bool { return b.Signalled || b.Held || b.Tainted }

// Unbacked says whether e is an entry that holds its node out on the Pool's status
// alone: memory that must find room in the breaker, like a new quarantine.
func Unbacked(e *v1alpha1.NodeHealthStatus, b MemoryBacking) bool {
	return e != nil && CountsAsOut(e.State) && e.State != v1alpha1.NodeHealthReleased && !b.Backed()
}

// MemoryRoom is how many unbacked entries the breaker may honour: the breaker's limit
// less the members that are out on a backing and those whose signal will take them
// out this pass (a signal comes before memory).
func MemoryRoom(members, backedOut, newFaults int, maxPercent int32) int {
	room := BreakerRoom(members, backedOut, maxPercent) - newFaults
	if room < 0 {
		return 0
	}
	return room
}

// HonourUnbacked is the entry an unbacked entry becomes. With room in the breaker it is
// a quarantine of its node to be re-checked, whatever it said: not fatal (nothing is
// drained on it), no Job or run of its own, reason Unbacked (never a held-out reason,
// so it is never held out on memory alone); NextHealth then takes it to its re-check,
// which returns it when it passes. Without room it is not honoured: nil, and why
// names the rule.
func HonourUnbacked(e *v1alpha1.NodeHealthStatus, room bool, maxPercent int32, now time.Time) (_ *v1alpha1.NodeHealthStatus, why string) {
	claim := fmt.Sprintf("the Pool's status says %s (%s) but the node shows no signal, spec.health.hold does not name it and it carries no %s taint",
		e.State, e.Reason, TaintQuarantine)
	if !room {
		return nil, claim + fmt.Sprintf("; not honoured: the circuit breaker (spec.health.maxQuarantinedPercent %d%%) is full, and status is memory, not an order", maxPercent)
	}
	if e.State == v1alpha1.NodeHealthQuarantined && e.Reason == ReasonUnbacked && !e.Fatal && e.Job == "" && e.StressRun == "" {
		return e, ""
	}
	out := &v1alpha1.NodeHealthStatus{Node: e.Node, ReturnedAt: e.ReturnedAt, History: e.History}
	t := metav1.NewTime(now)
	out.State, out.Reason, out.Since, out.FaultedAt = v1alpha1.NodeHealthQuarantined, ReasonUnbacked, t, &t
	out.Message = claim + "; quarantined within the circuit breaker until its re-check"
	out.History = appendHistory(out.History, v1alpha1.NodeHealthTransition{Time: t, State: out.State, Reason: out.Reason})
	return out, ""
}

// StickyUnbacked keeps an episode that began on memory alone Unbacked while its node
// shows no signal: the node's quarantine taint says Unbacked, and the entry's reason
// (the Pool's status, which a pools/status writer may rewrite) is what the taint
// follows, so a rewritten reason would otherwise dress the episode as a signal's, which
// the domain rule counts (spec.health.domainOutPercent).
func StickyUnbacked(e *v1alpha1.NodeHealthStatus, n *corev1.Node, signalled bool) *v1alpha1.NodeHealthStatus {
	t := QuarantineTaintOf(n)
	if signalled || e == nil || t == nil || t.Value != QuarantineTaint(ReasonUnbacked).Value || e.Reason == ReasonUnbacked ||
		!CountsAsOut(e.State) || e.State == v1alpha1.NodeHealthHeldOut || e.State == v1alpha1.NodeHealthReleased {
		return e
	}
	out := e.DeepCopy()
	out.Reason = ReasonUnbacked
	return out
}
