package policy

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Reasons of the domain rule (spec.health.domainOutPercent).
const (
	// ReasonDomainHeldOut is the reason (and quarantine taint value) of a member held
	// out because its unit domain is out whole, not for a fault of its own.
	ReasonDomainHeldOut = "DomainHeldOut"
	// ReasonDomainReturned is the reason of a member back in service with its domain.
	ReasonDomainReturned = "DomainReturned"
)

// CheckDomainOutPercent is rule R1 for spec.health.domainOutPercent: 1 to 100, and only
// on a pool with spec.topology, whose unit level gives the domains it counts.
func CheckDomainOutPercent(pool *v1alpha1.Pool) error {
	h := pool.Spec.Health
	if h == nil || h.DomainOutPercent == 0 {
		return nil
	}
	const field = "spec.health.domainOutPercent"
	if h.DomainOutPercent < 0 || h.DomainOutPercent > 100 {
		return fieldViolationf("R1", field, "%s %d is out of range: give a share of a domain's members from 1 to 100, or leave it out", field, h.DomainOutPercent)
	}
	if !HasTopology(pool) {
		return fieldViolationf("R1", field, "%s %d needs domains, and pool %q has no spec.topology: declare spec.topology (a preset or levels), or leave %s out", field, h.DomainOutPercent, pool.Name, field)
	}
	return nil
}

// healthTopology is the topology the domain rule counts by, when the pool sets
// spec.health.domainOutPercent and a topology that resolves.
func healthTopology(pool *v1alpha1.Pool) (Topology, bool) {
	if pool.Spec.Health == nil || pool.Spec.Health.DomainOutPercent <= 0 || !HasTopology(pool) {
		return Topology{}, false
	}
	t, err := ResolveTopology(pool.Spec.Topology)
	return t, err == nil
}

// DomainHeldTaint says whether node carries the loop's taint for its domain's hold.
func DomainHeldTaint(node *corev1.Node) bool {
	t := QuarantineTaintOf(node)
	return t != nil && t.Value == QuarantineTaint(ReasonDomainHeldOut).Value
}

// HealthMember is what the domain health rule reads of one member once its own step is
// decided (pkg/health fills it in from the node and the step).
type HealthMember struct {
	Name string
	// Domain is the member's unit domain by its labels now ("" when it is in none).
	Domain string
	// Out: its own step holds it out (any reason of its own).
	Out bool
	// Faulted: it is out on something besides the Pool's status (a signal now, an
	// operator's hold, or the loop's taint of a signal's quarantine) and its episode
	// began in Domain (the entry's domain agrees with the labels): it counts toward
	// its domain's share.
	Faulted bool
	// FaultSize is the members its domain had when its episode began.
	FaultSize int32
	// Witnessed: it carried the loop's quarantine taint at the start of the pass and
	// its entry names Domain: it may stay in a hold that began before this pass.
	Witnessed bool
	// WasHeld: it carried the domain hold's taint at the start of the pass.
	WasHeld bool
}

// DomainHold is the rule's answer for one domain whose share of faulted members
// reached spec.health.domainOutPercent.
type DomainHold struct {
	Domain string
	// Faulted and Size are the share: members out on their own and the domain's size
	// (never below the size its faulted members' episodes began with).
	Faulted, Size int
	// Hold are the members held out with it (not Out on their own); when Refused,
	// those it would have held.
	Hold []string
	// Refused says why the domain is not held (the breaker).
	Refused string
	// Message is what the held members' entries and Events say.
	Message string
}

// PlanDomainHolds is the domain rule: a unit domain whose members out on their own
// (Faulted) reach percent of its size is held out whole, its other members with it;
// below the percent it comes back whole. A domain held before this pass keeps only the
// members that carried the loop's taint (Witnessed), so a member moved into it by a
// label is never taken out; a domain going out now takes every member its labels give.
// Holds never pass the pool's breaker (maxPercent of all members, at least one, counted
// with the members out on their own): a domain that does not fit whole is not held at
// all. Domains held before come first, then by name, so a pass does not swap them.
func PlanDomainHolds(members []HealthMember, percent, maxPercent int32) []DomainHold {
	if percent <= 0 {
		return nil
	}
	byDomain := map[string][]HealthMember{}
	out := 0
	for _, m := range members {
		if m.Out {
			out++
		}
		if m.Domain != "" {
			byDomain[m.Domain] = append(byDomain[m.Domain], m)
		}
	}
	limit := max(len(members)*int(maxPercent)/100, 1)
	var holds []DomainHold
	wasHeld := map[string]bool{}
	for d, ms := range byDomain {
		h, held := shareOf(d, ms, percent)
		if h == nil {
			continue
		}
		wasHeld[d] = held
		holds = append(holds, *h)
	}
	slices.SortFunc(holds, func(a, b DomainHold) int {
		if wasHeld[a.Domain] != wasHeld[b.Domain] {
			if wasHeld[a.Domain] {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Domain, b.Domain)
	})
	for i := range holds {
		h := &holds[i]
		if out+len(h.Hold) > limit {
			h.Refused = fmt.Sprintf("domain %s has %d of %d members out (spec.health.domainOutPercent %d%%), but holding its other %d out would pass the circuit breaker (spec.health.maxQuarantinedPercent %d%%: at most %d of %d members, %d out already): not held",
				h.Domain, h.Faulted, h.Size, percent, len(h.Hold), maxPercent, limit, len(members), out)
			continue
		}
		out += len(h.Hold)
		h.Message = fmt.Sprintf("domain %s has %d of %d members out on their own signals (spec.health.domainOutPercent %d%%): held out whole until fewer are",
			h.Domain, h.Faulted, h.Size, percent)
	}
	return holds
}

// shareOf is domain d's hold when its faulted members reach percent (nil below it), and
// whether it was held before this pass.
func shareOf(d string, ms []HealthMember, percent int32) (*DomainHold, bool) {
	size, faulted, held := len(ms), 0, false
	for _, m := range ms {
		if m.Faulted {
			faulted++
			size = max(size, int(m.FaultSize))
		}
		held = held || m.WasHeld
	}
	if faulted == 0 || faulted*100 < int(percent)*size {
		return nil, held
	}
	h := &DomainHold{Domain: d, Faulted: faulted, Size: size}
	for _, m := range ms {
		if !m.Out && (!held || m.Witnessed) {
			h.Hold = append(h.Hold, m.Name)
		}
	}
	slices.Sort(h.Hold)
	return h, held
}

// DomainOutEntry is the entry of a member held out with its domain: prev's flap memory
// and history kept, the domain recorded.
func DomainOutEntry(prev *v1alpha1.NodeHealthStatus, node, domain, message string, now time.Time) *v1alpha1.NodeHealthStatus {
	out := &v1alpha1.NodeHealthStatus{Node: node}
	if prev != nil {
		out.ReturnedAt, out.History = prev.ReturnedAt, prev.History
		if prev.State == v1alpha1.NodeHealthDomainOut {
			out.Since = prev.Since
		}
	}
	if out.Since.IsZero() {
		out.Since = metav1.NewTime(now)
		out.History = appendHistory(out.History, v1alpha1.NodeHealthTransition{Time: out.Since, State: v1alpha1.NodeHealthDomainOut, Reason: ReasonDomainHeldOut})
	}
	out.State, out.Reason, out.Message, out.Domain = v1alpha1.NodeHealthDomainOut, ReasonDomainHeldOut, message, domain
	return out
}
