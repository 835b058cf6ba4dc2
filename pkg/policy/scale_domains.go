package policy

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Scale-down by domain (issue 40). On a pool with a topology a scale-down keeps unit
// domains whole: a job that spans a super node needs all of it, so taking one idle node
// from each of four domains leaves four domains unfit, where taking one idle domain
// whole leaves three fit. The per-domain floor (minNodesPerDomain) is the one rule N3
// keeps in the webhook too (CheckDomainFloor). It counts members in service (NodeOut
// says none), as the pool floor counts Ready members: a member out of service holds
// none of the domain's capacity, so it may always leave, and a domain leaves whole by
// being cordoned first (as a scale-down does) and then leaving one node at a time.

// DomainScale is what scale-down planning knows of a pool's domains.
type DomainScale struct {
	Pool     string
	Topology Topology
	// Domain is each member's unit domain; a member absent from it is outside every
	// domain (a level's label is missing).
	Domain map[string]string
	// InService says which members hold capacity (NodeOut is "").
	InService map[string]bool
}

// NewDomainScale reads the members' domains and whether each is in service. In service
// is NodeOut with the pool's spec.accelerator.resourceName, as the webhook's N3 counts
// it (admission's DomainAfter): a member tainted <resource>:NoSchedule, which
// ExtendedResourceToleration tolerates for the pool's pods, holds capacity, so the plan
// and the webhook agree on the floor.
func NewDomainScale(pool *v1alpha1.Pool, t Topology, members []*corev1.Node) DomainScale {
	ds := DomainScale{Pool: pool.Name, Topology: t, Domain: map[string]string{}, InService: map[string]bool{}}
	resource := pool.Spec.Accelerator.ResourceName
	for _, n := range members {
		if d, ok := t.DomainOf(n); ok {
			ds.Domain[n.Name] = d
		}
		ds.InService[n.Name] = NodeOut(n, pool.Name, resource) == ""
	}
	return ds
}

func (ds DomainScale) floor() int { return int(max(ds.Topology.MinNodesPerDomain, 1)) }

// DomainPlan is a scale-down planned by domain: the nodes in the order they go, and how
// they were chosen (for --dry-run and the confirmation).
type DomainPlan struct {
	Remove []string
	// Resumed are nodes an interrupted scale-down of the pool had started on.
	Resumed []string
	// Whole are the domains that leave whole, in the order taken.
	Whole []string
	// Outside are the members outside every domain that are taken.
	Outside []string
	// Partial are the domains that lose some of their members (domain -> members taken).
	Partial map[string][]string
}

// CheckDomainFloor is N3's per-domain floor: a domain may lose members in service
// (takenInService of its inService members) only while those that stay in service
// number 0 (it leaves, or is out already) or at least floor. Members out of service may
// always leave. members are the domain's member names, for the error.
func CheckDomainFloor(pool, domain string, members []string, inService, takenInService, floor int) error {
	stay := inService - takenInService
	if takenInService == 0 || stay <= 0 || stay >= floor {
		return nil
	}
	return Violationf("N3", "domain %q of pool %q has %d node(s), %d in service, and minNodesPerDomain %d: this would leave %d in service; take at most %d of its nodes in service, or the whole domain (%s), or cordon the ones that stay first",
		domain, pool, len(members), inService, floor, stay, max(inService-floor, 0), summarize(members, 8))
}

// PlanScaleDown picks count members to remove on a pool with a topology, in this order:
//  1. nodes an interrupted scale-down of the pool started on (it resumes, as without a
//     topology);
//  2. whole idle domains (no member runs a workload pod) that fit in what is left to
//     take, those with fewest members in service first (a degraded domain is the least
//     use to a job that needs it whole), then by name, last first;
//  3. members outside every domain, in the flat rule's order (PlanScaleDown): no job
//     that needs a domain can use them, and taking them breaks no domain;
//  4. members of the least used domain first (accelerators in use, then workload pods),
//     each domain in the flat rule's order, keeping its floor (CheckDomainFloor): it
//     gives members down to minNodesPerDomain in service, or all of them if that fits.
//
// It never goes below minNodes, in members or in Ready members, as PlanScaleDown; it
// fails naming the floors when the domains' floors leave too few nodes to take.
func (ds DomainScale) PlanScaleDown(pool *v1alpha1.Pool, members []ScaleCandidate, count int) (DomainPlan, error) {
	if err := CheckScaleDown(pool, len(members), len(members)-count); err != nil {
		return DomainPlan{}, err
	}
	p := &domainPlanner{ds: ds, need: count, ready: countReady(members), poolFloor: MinNodes(pool.Spec),
		taken: map[string]bool{}, plan: DomainPlan{Partial: map[string][]string{}}}
	order := flatOrder(members)
	for _, c := range order {
		if c.Resuming && p.take(c) {
			p.plan.Resumed = append(p.plan.Resumed, c.Name)
		}
	}
	domains, outside := p.groups(order)
	p.wholeIdle(domains)
	for _, c := range outside {
		if p.take(c) {
			p.plan.Outside = append(p.plan.Outside, c.Name)
		}
	}
	for _, d := range leastUsed(domains) {
		p.partial(d, domains[d])
	}
	if p.need > 0 {
		return p.plan, Violationf("N3", "pool %q cannot lose %d node(s) while each domain keeps minNodesPerDomain %d node(s) in service or leaves whole (and the pool keeps minNodes %d Ready): %d can go (%s); ask for fewer, or name whole domains with --remove",
			pool.Name, count, ds.floor(), p.poolFloor, len(p.plan.Remove), orNone(summarize(p.plan.Remove, 8)))
	}
	return p.plan, nil
}

// domainPlanner is one PlanScaleDown in progress.
type domainPlanner struct {
	ds               DomainScale
	need             int
	ready, poolFloor int
	taken            map[string]bool
	plan             DomainPlan
}

// take adds c to the plan if it is still needed and the pool keeps minNodes Ready.
func (p *domainPlanner) take(c ScaleCandidate) bool {
	if p.need == 0 || p.taken[c.Name] || (c.Ready && p.ready-1 < p.poolFloor) {
		return false
	}
	if c.Ready {
		p.ready--
	}
	p.need--
	p.taken[c.Name] = true
	p.plan.Remove = append(p.plan.Remove, c.Name)
	return true
}

// rest are the members of cs not taken yet.
func (p *domainPlanner) rest(cs []ScaleCandidate) []ScaleCandidate {
	var out []ScaleCandidate
	for _, c := range cs {
		if !p.taken[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

// groups splits the candidates by domain, each group in the flat order.
func (p *domainPlanner) groups(order []ScaleCandidate) (map[string][]ScaleCandidate, []ScaleCandidate) {
	domains := map[string][]ScaleCandidate{}
	var outside []ScaleCandidate
	for _, c := range order {
		if d, ok := p.ds.Domain[c.Name]; ok {
			domains[d] = append(domains[d], c)
		} else if !p.taken[c.Name] {
			outside = append(outside, c)
		}
	}
	return domains, outside
}

// wholeIdle takes whole idle domains that fit in what is left to take.
func (p *domainPlanner) wholeIdle(domains map[string][]ScaleCandidate) {
	var idle []string
	for d, cs := range domains {
		if pods, _ := usage(cs); pods == 0 {
			idle = append(idle, d)
		}
	}
	sort.Slice(idle, func(i, j int) bool {
		a, b := p.ds.inService(domains[idle[i]]), p.ds.inService(domains[idle[j]])
		if a != b {
			return a < b
		}
		return idle[i] > idle[j]
	})
	for _, d := range idle {
		rest := p.rest(domains[d])
		if len(rest) == 0 || len(rest) > p.need || p.ready-countReady(rest) < p.poolFloor {
			continue
		}
		for _, c := range rest {
			p.take(c)
		}
		p.plan.Whole = append(p.plan.Whole, d)
	}
}

// partial takes members of domain d down to its floor in service (CheckDomainFloor: or
// to none in service), or all of them when what is left to take allows.
func (p *domainPlanner) partial(d string, cs []ScaleCandidate) {
	rest := p.rest(cs)
	inService := p.ds.inService(rest)
	all := len(rest) <= p.need && p.ready-countReady(rest) >= p.poolFloor
	for _, c := range rest {
		if p.need == 0 {
			break
		}
		if stay := inService - 1; p.ds.InService[c.Name] && !all && stay > 0 && stay < p.ds.floor() {
			continue
		}
		if p.take(c) {
			p.plan.Partial[d] = append(p.plan.Partial[d], c.Name)
			if p.ds.InService[c.Name] {
				inService--
			}
		}
	}
	if len(p.rest(cs)) == 0 && len(p.plan.Partial[d]) == len(cs) {
		delete(p.plan.Partial, d)
		p.plan.Whole = append(p.plan.Whole, d)
	}
}

func (ds DomainScale) inService(cs []ScaleCandidate) int {
	n := 0
	for _, c := range cs {
		if ds.InService[c.Name] {
			n++
		}
	}
	return n
}

// usage is what a domain's members run: workload pods and accelerators in use.
func usage(cs []ScaleCandidate) (pods int, accel int64) {
	for _, c := range cs {
		pods += c.WorkloadPods
		accel += c.Used
	}
	return pods, accel
}

// leastUsed orders the domains by accelerators in use, then workload pods, then name,
// last first.
func leastUsed(domains map[string][]ScaleCandidate) []string {
	out := make([]string, 0, len(domains))
	for d := range domains {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		pa, ua := usage(domains[out[i]])
		pb, ub := usage(domains[out[j]])
		if ua != ub {
			return ua < ub
		}
		if pa != pb {
			return pa < pb
		}
		return out[i] > out[j]
	})
	return out
}

// CheckScaleDownNodes is S2 and N3 for nodes named with --remove on a pool with a
// topology: the pool's own checks, then each domain's floor (CheckDomainFloor).
func (ds DomainScale) CheckScaleDownNodes(pool *v1alpha1.Pool, members []ScaleCandidate, remove []string) error {
	if err := CheckScaleDownNodes(pool, members, remove); err != nil {
		return err
	}
	gone := map[string]bool{}
	for _, n := range remove {
		gone[n] = true
	}
	byDomain := map[string][]string{}
	for _, m := range candidateNames(members) {
		if d, ok := ds.Domain[m]; ok {
			byDomain[d] = append(byDomain[d], m)
		}
	}
	domains := make([]string, 0, len(byDomain))
	for d := range byDomain {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	for _, d := range domains {
		inService, taken := 0, 0
		for _, m := range byDomain[d] {
			if ds.InService[m] {
				inService++
				if gone[m] {
					taken++
				}
			}
		}
		if err := CheckDomainFloor(ds.Pool, d, byDomain[d], inService, taken, ds.floor()); err != nil {
			return err
		}
	}
	return nil
}

// FreeBlock is the largest free block of a pool: the most free accelerators in one
// whole unit domain (every member in service).
type FreeBlock struct {
	Domain   string
	Free     int64
	Resource corev1.ResourceName
}

func (b FreeBlock) String() string {
	if b.Domain == "" {
		return "none (no whole domain)"
	}
	return fmt.Sprintf("%d %s in domain %s", b.Free, b.Resource, b.Domain)
}

// LargestFreeBlock is the largest free block of members once the nodes in gone have
// left, read from the domain view (Topology.Domains, the one capacity computation): the
// whole domain with the most free accelerators (a tie goes to the smaller name).
func LargestFreeBlock(t Topology, members []*corev1.Node, used map[string]int64, resource corev1.ResourceName, gone map[string]bool) FreeBlock {
	var stay []*corev1.Node
	for _, n := range members {
		if !gone[n.Name] {
			stay = append(stay, n)
		}
	}
	best := FreeBlock{Resource: resource}
	for _, d := range t.Domains(stay, used, resource).Domains { // sorted by name
		if d.State == DomainWhole && (best.Domain == "" || d.Free > best.Free) {
			best.Domain, best.Free = d.Name, d.Free
		}
	}
	return best
}

// Describe is the plan in a few lines, for --dry-run.
func (p DomainPlan) Describe() []string {
	var out []string
	if len(p.Resumed) > 0 {
		out = append(out, "resumes the interrupted scale-down of "+strings.Join(p.Resumed, ", "))
	}
	for _, d := range p.Whole {
		out = append(out, fmt.Sprintf("domain %s leaves whole", d))
	}
	if len(p.Outside) > 0 {
		out = append(out, "outside every domain: "+strings.Join(p.Outside, ", "))
	}
	partial := make([]string, 0, len(p.Partial))
	for d := range p.Partial {
		partial = append(partial, d)
	}
	sort.Strings(partial)
	for _, d := range partial {
		out = append(out, fmt.Sprintf("domain %s gives %s", d, strings.Join(p.Partial[d], ", ")))
	}
	return out
}

// BlockResource is the accelerator a pool's free blocks are counted in: its
// spec.accelerator.resourceName, else the one its members offer most of (as
// PoolCapacity).
func BlockResource(pool *v1alpha1.Pool, members []*corev1.Node, accel Accelerators) corev1.ResourceName {
	if pool.Spec.Accelerator.ResourceName != "" {
		return pool.Spec.Accelerator.ResourceName
	}
	return mostOffered(members, accel)
}
