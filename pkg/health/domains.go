package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// domainPass is the domain rule (spec.health.domainOutPercent) over one pass: it
// records the domain each episode began in, gathers what policy.PlanDomainHolds reads
// of each member once its own step is decided, and rewrites the steps of the members
// held with their domain, refused by the breaker, or returned with it.
type domainPass struct {
	s        policy.HealthSettings
	domainOf map[string]string
	size     map[string]int
	members  []policy.HealthMember
}

func newDomainPass(s policy.HealthSettings, members []corev1.Node) *domainPass {
	d := &domainPass{s: s, domainOf: map[string]string{}, size: map[string]int{}}
	if s.Topology == nil {
		return d
	}
	for i := range members {
		if dom, ok := s.Topology.DomainOf(&members[i]); ok {
			d.domainOf[members[i].Name] = dom
			d.size[dom]++
		}
	}
	return d
}

// recordEpisode writes into a step's entry the domain its episode began in and that
// domain's size then (kept while the episode lasts: a later label move does not carry
// the fault into another domain), and clears them once the member is in service. in is
// the entry the step began from.
func (d *domainPass) recordEpisode(e, in *v1alpha1.NodeHealthStatus, n *corev1.Node) {
	if !policy.CountsAsOut(e.State) {
		e.Domain, e.DomainSize = "", 0
		return
	}
	if d.s.Topology == nil || (in != nil && policy.CountsAsOut(in.State) && in.Domain != "") {
		return
	}
	dom := d.domainOf[n.Name]
	e.Domain, e.DomainSize = dom, int32(d.size[dom])
}

// member gathers what the rule reads of member n: stored is its entry at the start of
// the pass, entry the one its own step decided.
func (d *domainPass) member(n *corev1.Node, stored, entry *v1alpha1.NodeHealthStatus, b policy.MemoryBacking, signals []policy.HealthSignal) {
	dom := d.domainOf[n.Name]
	m := policy.HealthMember{Name: n.Name, Domain: dom, Out: entry != nil && policy.CountsAsOut(entry.State)}
	if dom == "" {
		d.members = append(d.members, m)
		return
	}
	if m.Out && entry.Domain == dom {
		m.Faulted = len(signals) > 0 || b.Held || d.witnessedFault(n, stored, dom)
		m.FaultSize = entry.DomainSize
	}
	recorded := stored != nil && stored.Domain == dom
	t := policy.QuarantineTaintOf(n)
	m.WasHeld = recorded && (policy.DomainHeldTaint(n) || stored.State == v1alpha1.NodeHealthDomainOut)
	m.Witnessed = recorded && (t != nil || stored.State == v1alpha1.NodeHealthDomainOut)
	d.members = append(d.members, m)
}

// witnessedFault: the member went out in dom on a signal in an earlier pass, as its
// quarantine taint confirms: the taint carries the entry's reason, and that reason is
// a fault's, not memory's (Unbacked, Unaccounted), a re-check that could not run
// (ImageNotApproved, NoDefinition), the domain rule's own, or a passed re-check's
// (Recovered: Holding, which an Unbacked episode reaches too, and whose signals are
// clear).
func (d *domainPass) witnessedFault(n *corev1.Node, stored *v1alpha1.NodeHealthStatus, dom string) bool {
	if stored == nil || !policy.CountsAsOut(stored.State) || stored.State == v1alpha1.NodeHealthDomainOut || stored.Domain != dom {
		return false
	}
	switch stored.Reason {
	case policy.ReasonUnbacked, policy.ReasonUnaccounted, policy.ReasonImageNotApproved, policy.ReasonNoDefinition, policy.ReasonDomainHeldOut,
		policy.ReasonRecovered:
		return false
	}
	if d.s.DryRun {
		return true
	}
	t := policy.QuarantineTaintOf(n)
	return t != nil && t.Value == policy.QuarantineTaint(stored.Reason).Value
}

// apply rewrites the steps of the members the rule holds, refuses or returns.
func (d *domainPass) apply(steps []Step, now time.Time) {
	holds := policy.PlanDomainHolds(d.members, d.s.DomainOutPercent, d.s.MaxQuarantinedPercent)
	held, refused := map[string]policy.DomainHold{}, map[string]policy.DomainHold{}
	for _, h := range holds {
		for _, n := range h.Hold {
			if h.Refused != "" {
				refused[n] = h
			} else {
				held[n] = h
			}
		}
	}
	for i := range steps {
		st := &steps[i]
		if st.node == nil {
			continue
		}
		prev := st.prev
		if h, ok := held[st.Node]; ok {
			st.Entry = policy.DomainOutEntry(prev, st.Node, h.Domain, h.Message, now)
			st.Changed = prev == nil || prev.State != v1alpha1.NodeHealthDomainOut || prev.Message != h.Message || !policy.DomainHeldTaint(st.node)
			st.Taint, st.Action = !d.s.DryRun, policy.ActionNone
			continue
		}
		if h, ok := refused[st.Node]; ok {
			st.Entry = domainEntry(prev, st.Node, v1alpha1.NodeHealthWaiting, policy.ReasonDomainHeldOut, h.Refused, now)
			st.Changed = prev == nil || prev.State != v1alpha1.NodeHealthWaiting || prev.Message != h.Refused
			st.Taint, st.Action = false, policy.ActionNone
			continue
		}
		if markedByDomain(prev, st.node) && (st.Entry == nil || !policy.CountsAsOut(st.Entry.State)) {
			st.Entry = domainEntry(prev, st.Node, v1alpha1.NodeHealthHealthy, policy.ReasonDomainReturned,
				"back in service with its domain: fewer of its members are out than spec.health.domainOutPercent, or the rule is off", now)
			st.Changed, st.Taint = true, false
		}
	}
}

// markedByDomain: the member was held with its domain, or kept in service by the
// breaker only, at the start of the pass.
func markedByDomain(prev *v1alpha1.NodeHealthStatus, n *corev1.Node) bool {
	if policy.DomainHeldTaint(n) {
		return true
	}
	return prev != nil && (prev.State == v1alpha1.NodeHealthDomainOut || (prev.State == v1alpha1.NodeHealthWaiting && prev.Reason == policy.ReasonDomainHeldOut))
}

// domainEntry is a member's entry in state for the domain rule, keeping prev's flap
// memory and history.
func domainEntry(prev *v1alpha1.NodeHealthStatus, node string, state v1alpha1.NodeHealthState, reason, msg string, now time.Time) *v1alpha1.NodeHealthStatus {
	e := &v1alpha1.NodeHealthStatus{Node: node, State: state, Reason: reason, Message: msg, Since: metav1.NewTime(now)}
	if prev == nil {
		return e
	}
	e.ReturnedAt, e.History = prev.ReturnedAt, prev.History
	if prev.State == state && prev.Reason == reason {
		e.Since = prev.Since
		return e
	}
	e.History = append(append([]v1alpha1.NodeHealthTransition{}, e.History...), v1alpha1.NodeHealthTransition{Time: e.Since, State: state, Reason: reason})
	if len(e.History) > 10 {
		e.History = e.History[len(e.History)-10:]
	}
	return e
}

// heldWithDomain: the member is held out with its domain at the start of the pass: its
// quarantine taint says so, or, with no quarantine taint, its entry does. A DomainOut
// entry on a node whose taint is a fault's is the Pool's status's word against the
// taint's, and the taint wins (policy.WitnessedEntry).
func heldWithDomain(e *v1alpha1.NodeHealthStatus, n *corev1.Node) bool {
	if t := policy.QuarantineTaintOf(n); t != nil {
		return policy.DomainHeldTaint(n)
	}
	return e != nil && e.State == v1alpha1.NodeHealthDomainOut
}

// inServiceEntry is the entry of a member held with its domain, as its own step reads
// it: in service, with its flap memory.
func inServiceEntry(stored *v1alpha1.NodeHealthStatus) *v1alpha1.NodeHealthStatus {
	if stored == nil {
		return nil
	}
	return &v1alpha1.NodeHealthStatus{Node: stored.Node, State: v1alpha1.NodeHealthHealthy, ReturnedAt: stored.ReturnedAt, History: stored.History}
}

func nodePointers(nodes []corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	return out
}
