package policy

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// ReasonUnaccounted holds out a node that carries the quarantine taint while the Pool's
// status holds no entry that keeps it out: the entry was removed or changed by a writer
// of pools/status (or the taint was put on by hand). The status is the loop's memory,
// not an order, so its loss keeps the node out rather than returning it.
const ReasonUnaccounted = "Unaccounted"

// HeldOutReasons are the reasons of a node held out until released by hand; the
// quarantine taint carries them, so the loop can tell when an entry lost one.
var HeldOutReasons = []string{ReasonFlapping, ReasonRecheckFailed, ReasonRemediationFailed, ReasonHeldByHand,
	ReasonImageNotApproved, ReasonNoDefinition, ReasonUnaccounted}

// Reasons the health controller holds a node out for besides the loop's own.
const (
	// ReasonImageNotApproved: the re-check or remediation image is not the operator's.
	ReasonImageNotApproved = "ImageNotApproved"
	// ReasonNoDefinition: the Pool names no operator definition, or one that is not there.
	ReasonNoDefinition = "NoDefinition"
)

// QuarantineTaintOf is the node's quarantine taint, nil without one.
func QuarantineTaintOf(n *corev1.Node) *corev1.Taint {
	if n == nil {
		return nil
	}
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == TaintQuarantine {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

// heldOutReasonOf is the held-out reason a quarantine taint's value names ("" if none).
func heldOutReasonOf(t *corev1.Taint) string {
	for _, r := range HeldOutReasons {
		if QuarantineTaint(r).Value == t.Value {
			return r
		}
	}
	return ""
}

// WitnessedEntry is the node's entry as its quarantine taint confirms it. The entry is
// in the Pool's status, which anyone with pools/status may write; the taint only the
// controller and writers of nodes. A tainted node whose entry says it is not out, and a
// node whose taint names a held-out reason its entry no longer has, are held out: a
// changed entry never returns a node. changed: the entry was replaced.
func WitnessedEntry(e *v1alpha1.NodeHealthStatus, n *corev1.Node, now time.Time) (_ *v1alpha1.NodeHealthStatus, changed bool) {
	t := QuarantineTaintOf(n)
	if t == nil {
		return e, false
	}
	why := ""
	switch held := heldOutReasonOf(t); {
	case held != "" && (e == nil || e.State != v1alpha1.NodeHealthHeldOut || QuarantineTaint(e.Reason).Value != t.Value):
		why = held
	case held == "" && (e == nil || !CountsAsOut(e.State) || e.State == v1alpha1.NodeHealthReleased):
		why = ReasonUnaccounted
	case held == "" && e.State == v1alpha1.NodeHealthHeldOut:
		// The entry holds the node out for a reason its taint does not carry: the taint
		// witnesses a quarantine, not a hold, so the node goes to its re-check as one
		// (a hold in spec.health.hold is applied after this, by HealthOrders).
		return unwitnessedHold(e, t, now), true
	default:
		return e, false
	}
	out := &v1alpha1.NodeHealthStatus{Node: n.Name}
	if e != nil {
		out = e.DeepCopy()
	}
	out.State, out.Reason, out.Since = v1alpha1.NodeHealthHeldOut, why, metav1.NewTime(now)
	out.Message = "carries " + TaintQuarantine + "=" + t.Value + " but the Pool's status does not hold it out as that: " +
		"the entry was removed or changed (status is the loop's memory, not an order), held out until released by hand"
	out.History = appendHistory(out.History, v1alpha1.NodeHealthTransition{Time: out.Since, State: out.State, Reason: why})
	return out, true
}

// unwitnessedHold is a HeldOut entry of a node whose taint names a quarantine: a
// quarantine again, reason Unbacked, to be re-checked (never held out on the status's
// word: a pools/status writer could otherwise turn a quarantine into an indefinite
// hold, or into a hold by hand that the next pass releases).
func unwitnessedHold(e *v1alpha1.NodeHealthStatus, t *corev1.Taint, now time.Time) *v1alpha1.NodeHealthStatus {
	out := &v1alpha1.NodeHealthStatus{Node: e.Node, ReturnedAt: e.ReturnedAt, History: e.History}
	at := metav1.NewTime(now)
	out.State, out.Reason, out.Since, out.FaultedAt = v1alpha1.NodeHealthQuarantined, ReasonUnbacked, at, &at
	out.Message = "the Pool's status says " + string(e.State) + " (" + e.Reason + ") but the node's " + TaintQuarantine + "=" + t.Value +
		" is a quarantine's: re-checked as one (status is the loop's memory, not an order)"
	out.History = appendHistory(out.History, v1alpha1.NodeHealthTransition{Time: at, State: out.State, Reason: out.Reason})
	return out
}

// HealthOrders applies a person's orders for node from spec.health: a hold holds it
// out; a release returns it if it went out no later than the release (the taint's
// time, else the entry's); a node held by hand whose hold is gone is released. The
// returned entry is what NextHealth takes (state Released: return it now). changed:
// an order moved the node.
func HealthOrders(h *v1alpha1.HealthPolicy, e *v1alpha1.NodeHealthStatus, n *corev1.Node, now time.Time) (_ *v1alpha1.NodeHealthStatus, changed bool) {
	if h == nil || n == nil {
		return e, false
	}
	hold, release := ordersFor(h, n.Name)
	t := QuarantineTaintOf(n)
	switch {
	case hold != nil:
		msg := "held out by " + orSomeone(hold.By) + " (spec.health.hold)"
		if hold.Reason != "" {
			msg += ": " + hold.Reason
		}
		if e != nil && e.State == v1alpha1.NodeHealthHeldOut && e.Reason == ReasonHeldByHand && e.Message == msg {
			return e, false
		}
		out := &v1alpha1.NodeHealthStatus{Node: n.Name}
		if e != nil {
			out = e.DeepCopy()
		}
		out.State, out.Reason, out.Message, out.By, out.Since = v1alpha1.NodeHealthHeldOut, ReasonHeldByHand, msg, hold.By, metav1.NewTime(now)
		out.History = appendHistory(out.History, v1alpha1.NodeHealthTransition{Time: out.Since, State: out.State, Reason: ReasonHeldByHand})
		return out, true
	case e == nil || !CountsAsOut(e.State):
		return e, false
	case release != nil && !outSince(e, t).After(release.At.Time):
		return released(e, release.By, now), true
	case e.State == v1alpha1.NodeHealthHeldOut && e.Reason == ReasonHeldByHand && (t == nil || heldOutReasonOf(t) == ReasonHeldByHand):
		return released(e, "", now), true
	}
	return e, false
}

func ordersFor(h *v1alpha1.HealthPolicy, node string) (hold *v1alpha1.NodeHold, release *v1alpha1.NodeRelease) {
	for i := range h.Hold {
		if h.Hold[i].Node == node {
			hold = &h.Hold[i]
		}
	}
	for i := range h.Release {
		if h.Release[i].Node == node {
			release = &h.Release[i]
		}
	}
	return hold, release
}

// outSince is when the node's present quarantine began: the taint's time, which the
// controller stamps when it puts the taint on; the entry's only for a taint without one.
func outSince(e *v1alpha1.NodeHealthStatus, t *corev1.Taint) time.Time {
	switch {
	case t != nil && t.TimeAdded != nil:
		return t.TimeAdded.Time
	case e.FaultedAt != nil:
		return e.FaultedAt.Time
	}
	return e.Since.Time
}

func released(e *v1alpha1.NodeHealthStatus, by string, now time.Time) *v1alpha1.NodeHealthStatus {
	out := e.DeepCopy()
	out.State, out.By, out.Since = v1alpha1.NodeHealthReleased, by, metav1.NewTime(now)
	return out
}

func orSomeone(by string) string {
	if by == "" {
		return "someone"
	}
	return by
}

func appendHistory(h []v1alpha1.NodeHealthTransition, t v1alpha1.NodeHealthTransition) []v1alpha1.NodeHealthTransition {
	h = append(h, t)
	if len(h) > healthHistory {
		h = h[len(h)-healthHistory:]
	}
	return h
}

// CheckHealthRelease is the health verb's release of node: only a node that is out
// can be released, and the denial says which states are.
func CheckHealthRelease(e *v1alpha1.NodeHealthStatus, n *corev1.Node) error {
	if DomainHeldTaint(n) || (e != nil && e.State == v1alpha1.NodeHealthDomainOut) {
		return Violationf("H1", "node %s shows no fault of its own: it is held out with its domain (spec.health.domainOutPercent) and returns with it; release the domain's faulted members, or lower or remove spec.health.domainOutPercent", n.Name)
	}
	if QuarantineTaintOf(n) != nil || (e != nil && CountsAsOut(e.State)) {
		return nil
	}
	state := v1alpha1.NodeHealthHealthy
	if e != nil {
		state = e.State
	}
	return Violationf("H1", "node %s is %s: only a node the health loop holds out (Quarantined, Draining, Remediating, Rechecking, Holding, HeldOut) can be released", n.Name, state)
}
