package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Domain states in a rollout's status.
const (
	RolloutDomainWaiting    = "Waiting"
	RolloutDomainInProgress = "InProgress"
	RolloutDomainDone       = "Done"
	RolloutDomainFailed     = "Failed"
)

// FieldMaxUnavailableDomains is the DriverRollout field of the domain strategy.
const FieldMaxUnavailableDomains = "spec.maxUnavailableDomains"

// CheckMaxUnavailableDomains is rule U6: a rollout by domain needs a pool with a
// topology, and k domains out at once must leave the pool's minNodes available
// whichever k domains go (the largest k are the worst case). members are the pool's
// nodes.
func CheckMaxUnavailableDomains(pool *v1alpha1.Pool, poolName string, members []*corev1.Node, k int32) error {
	if !HasTopology(pool) {
		return fieldViolationf("U6", FieldMaxUnavailableDomains, "%s applies to a pool with a topology, and pool %q has none (no spec.topology): use spec.maxUnavailable to roll node by node, or declare the pool's topology first",
			FieldMaxUnavailableDomains, poolName)
	}
	if k < 1 {
		return fieldViolationf("U6", FieldMaxUnavailableDomains, "%s is %d: it is at least 1", FieldMaxUnavailableDomains, k)
	}
	t, err := ResolveTopology(pool.Spec.Topology)
	if err != nil {
		return err
	}
	sizes := domainSizes(t, members)
	out := 0
	for i := 0; i < int(k) && i < len(sizes); i++ {
		out += sizes[i]
	}
	floor := int(max(pool.Spec.MinNodes, 1))
	if len(members)-out >= floor {
		return nil
	}
	fit := 0
	for left := len(members); fit < len(sizes) && left-sizes[fit] >= floor; fit++ {
		left -= sizes[fit]
	}
	accept := fmt.Sprintf("at most %d", fit)
	if fit == 0 {
		accept = "none: lower the pool's minNodes, or roll node by node with spec.maxUnavailable"
	}
	return fieldViolationf("U6", FieldMaxUnavailableDomains, "%s %d would leave %d of pool %q's %d nodes available (its %d largest domains hold %d), below its minNodes %d; accepted: %s",
		FieldMaxUnavailableDomains, k, len(members)-out, poolName, len(members), min(int(k), len(sizes)), out, floor, accept)
}

// domainSizes are the member counts of the pool's unit domains, largest first; a node
// outside every domain is a domain of its own.
func domainSizes(t Topology, members []*corev1.Node) []int {
	domains, outside := t.GroupByDomain(members)
	sizes := make([]int, 0, len(domains)+len(outside))
	for _, d := range domains {
		sizes = append(sizes, len(d))
	}
	for range outside {
		sizes = append(sizes, 1)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(sizes)))
	return sizes
}

// RolloutDomainKey is the domain a rollout's node is waved with: its domain, or the node
// alone when it is outside every domain.
func RolloutDomainKey(node, domain string) string {
	if domain == "" {
		return "node:" + node
	}
	return domain
}

// PlanDomainWave decides the next wave of a rollout by domain (rule U2 by domain):
// nodes in progress finish; a failed node stops everything; a domain the rollout has
// begun (a member started or done, another still required) starts its remaining Ready
// members at once, without taking another slot, so that it is out once; further
// domains start whole while fewer than maxDomains are in progress and the pool keeps
// minAvailable available nodes. Idle domains go before busy ones, then by name.
// domainOf keys each rollout node's domain (RolloutDomainKey); nodes holds every
// member of the pool.
func PlanDomainWave(nodes []UpgradeNode, domainOf map[string]string, maxDomains, minAvailable int) WavePlan {
	var plan WavePlan
	byDomain := map[string][]UpgradeNode{}
	for _, n := range nodes {
		if inRollout, _ := plan.tally(n); inRollout {
			d := domainOf[n.Name]
			byDomain[d] = append(byDomain[d], n)
		}
	}
	available := len(nodes) - len(plan.Unavailable)
	var begun, fresh []string
	for d, ns := range byDomain {
		switch domainPhase(ns) {
		case RolloutDomainInProgress:
			begun = append(begun, d)
		case RolloutDomainWaiting:
			fresh = append(fresh, d)
		}
	}
	if len(plan.Failed) > 0 {
		plan.Continue = nil
		for _, ns := range byDomain {
			for _, n := range ns {
				if n.State == UpgradeRequired {
					plan.Waiting = append(plan.Waiting, n.Name)
				}
			}
		}
		sort.Strings(plan.Waiting)
		return plan
	}
	sort.Strings(begun)
	for _, d := range begun {
		available -= plan.startDomain(byDomain[d])
	}
	sortDomains(fresh, byDomain)
	slots := maxDomains - len(begun)
	for _, d := range fresh {
		ns := byDomain[d]
		if out := availableOf(ns); slots > 0 && domainReady(ns) && available-out >= minAvailable {
			available -= plan.startDomain(ns)
			slots--
			continue
		}
		for _, n := range ns {
			plan.Waiting = append(plan.Waiting, n.Name)
			if !n.Ready {
				plan.NotReady = append(plan.NotReady, n.Name)
			} else if domainReady(ns) {
				plan.NoSlot = append(plan.NoSlot, n.Name)
			}
		}
	}
	return plan
}

// startDomain starts a domain's Ready required members (its NotReady ones wait: an
// upgrade would only time out on them) and returns how many available nodes that
// takes out.
func (p *WavePlan) startDomain(ns []UpgradeNode) int {
	taken := 0
	for _, n := range ns {
		switch {
		case n.State != UpgradeRequired:
		case !n.Ready:
			p.Waiting = append(p.Waiting, n.Name)
			p.NotReady = append(p.NotReady, n.Name)
		default:
			p.Start = append(p.Start, n.Name)
			if !n.Unavailable {
				taken++
			}
		}
	}
	return taken
}

// domainReady says whether a domain not yet begun can start: all its members are
// Ready, or it would be out twice (now, and again when the NotReady one returns).
func domainReady(ns []UpgradeNode) bool {
	for _, n := range ns {
		if !n.Ready {
			return false
		}
	}
	return true
}

func availableOf(ns []UpgradeNode) int {
	c := 0
	for _, n := range ns {
		if n.Ready && !n.Unavailable {
			c++
		}
	}
	return c
}

// sortDomains orders the domains to start: idle ones first, then by name.
func sortDomains(ds []string, byDomain map[string][]UpgradeNode) {
	busy := func(d string) bool {
		for _, n := range byDomain[d] {
			if n.Busy {
				return true
			}
		}
		return false
	}
	sort.Slice(ds, func(i, j int) bool {
		if bi, bj := busy(ds[i]), busy(ds[j]); bi != bj {
			return !bi
		}
		return ds[i] < ds[j]
	})
}

// domainPhase is where a domain's nodes are as a whole.
func domainPhase(ns []UpgradeNode) string {
	var started, done, failed, required int
	for _, n := range ns {
		switch {
		case n.State == UpgradeDone:
			done++
		case n.State == UpgradeFailed:
			failed++
		case n.State == UpgradeRequired:
			required++
		case UpgradeStarted(n.State):
			started++
		}
	}
	switch {
	case failed > 0:
		return RolloutDomainFailed
	case started > 0 || (done > 0 && required > 0):
		return RolloutDomainInProgress
	case required > 0:
		return RolloutDomainWaiting
	default:
		return RolloutDomainDone
	}
}

// PredictDomainWaves lists the waves a rollout by domain will run if every node
// succeeds (for --dry-run).
func PredictDomainWaves(nodes []UpgradeNode, domainOf map[string]string, maxDomains, minAvailable int) (waves [][]string, waiting []string) {
	return predictWaves(nodes, func(cur []UpgradeNode) WavePlan { return PlanDomainWave(cur, domainOf, maxDomains, minAvailable) })
}

// RolloutDomains is each domain's progress and the time the rollout held it out: the
// union of its members' out intervals (OutSince to OutUntil, or to end while a member
// is still out). Nodes outside every domain are not domains and count nowhere here.
func RolloutDomains(nodes []v1alpha1.DriverRolloutNode, end time.Time) (domains []v1alpha1.DriverRolloutDomain, total time.Duration) {
	by := map[string][]v1alpha1.DriverRolloutNode{}
	for _, n := range nodes {
		if n.Domain != "" && n.State != string(UpgradeAborted) {
			by[n.Domain] = append(by[n.Domain], n)
		}
	}
	for _, name := range sortedNames(by) {
		ns := by[name]
		d := v1alpha1.DriverRolloutDomain{Name: name, Nodes: int32(len(ns))}
		ups := make([]UpgradeNode, len(ns))
		for i, n := range ns {
			ups[i] = UpgradeNode{Name: n.Name, State: UpgradeState(n.State)}
			if n.State == string(UpgradeDone) {
				d.Done++
			}
		}
		d.State = domainPhase(ups)
		out := outUnion(ns, end)
		d.UnavailableSeconds = int64(out / time.Second)
		total += out
		domains = append(domains, d)
	}
	return domains, total
}

// outUnion is the length of the union of the nodes' out intervals.
func outUnion(ns []v1alpha1.DriverRolloutNode, end time.Time) time.Duration {
	type span struct{ from, to time.Time }
	var spans []span
	for _, n := range ns {
		if n.OutSince == nil {
			continue
		}
		to := end
		if n.OutUntil != nil {
			to = n.OutUntil.Time
		}
		if to.After(n.OutSince.Time) {
			spans = append(spans, span{n.OutSince.Time, to})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	var total time.Duration
	var cur *span
	for i := range spans {
		s := spans[i]
		if cur != nil && !s.from.After(cur.to) {
			if s.to.After(cur.to) {
				cur.to = s.to
			}
			continue
		}
		if cur != nil {
			total += cur.to.Sub(cur.from)
		}
		cur = &s
	}
	if cur != nil {
		total += cur.to.Sub(cur.from)
	}
	return total
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DescribeDomains is one line per domain, for status and messages.
func DescribeDomains(ds []v1alpha1.DriverRolloutDomain) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s %s %d/%d", d.Name, strings.ToLower(d.State), d.Done, d.Nodes)
	}
	return out
}

// DomainPeersNotBack is why a node of a rollout by domain that has validated waits
// before its uncordon: the other members of its domain that are still being upgraded
// (started, not yet validated). A domain returns whole, as it went out whole, so that a
// gang scheduler (Kueue's TAS) never places work into a domain whose other members are
// still out, to see it stopped again. A member that failed or never started (NotReady)
// holds nothing back: it could hold the domain out for good. A node outside every
// domain waits for nobody.
func DomainPeersNotBack(nodes []v1alpha1.DriverRolloutNode, node string) []string {
	domain := ""
	for _, n := range nodes {
		if n.Name == node {
			domain = n.Domain
		}
	}
	if domain == "" {
		return nil
	}
	var out []string
	for _, n := range nodes {
		s := UpgradeState(n.State)
		if n.Domain == domain && n.Name != node && UpgradeStarted(s) && stateIndex(s) < stateIndex(UpgradeUncordon) {
			out = append(out, n.Name)
		}
	}
	return out
}
