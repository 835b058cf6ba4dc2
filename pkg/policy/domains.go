package policy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Domain is one unit domain of a pool (a super node, an NVL72 rack, a topology
// subblock) as its pods can use it now.
type Domain struct {
	// Name is the domain's key: the level values from the coarsest down to the unit,
	// joined by "/" (Topology.DomainOf).
	Name string
	// Members are the domain's members, sorted; Schedulable those NodeOut counts.
	Members, Schedulable []string
	// Total is the allocatable accelerators of the schedulable members; Free is what
	// pods leave of it (never below 0 per member).
	Total, Free int64
	// State is DomainWhole (every member schedulable), DomainDegraded (some) or
	// DomainOut (none).
	State string
	// Mixed says that the members carry more than one accelerator model, or more
	// than one accelerator count per node: a job shaped for one of them may not fit
	// the other. Topology labels are written by their own agents, so a domain that
	// becomes mixed is shown so, never refused.
	Mixed bool
}

// DomainView is a pool's unit domains, from one pass over its members.
type DomainView struct {
	// Domains are sorted by name.
	Domains []Domain
	// Outside are the members lacking a level's label, sorted: in no domain, shown
	// apart, never dropped.
	Outside []string
	// OutsideFigures are those members' figures counted as if they were one domain
	// (no name); they count in neither LargestFreeBlock nor WholeFree.
	OutsideFigures Domain
	// LargestFreeBlock is the most accelerators free in one whole domain: the largest
	// job that fits inside one unit now. A degraded domain is not counted: the jobs a
	// domain exists for need all of it.
	LargestFreeBlock int64
	// WholeFree counts whole domains with no accelerator in use.
	WholeFree int
}

// DomainMember is what the domain view reads of one member: its unit domain (none:
// Outside, a level's label is missing), whether it is in service (NodeOut, the one
// capacity computation that also feeds the quota), its allocatable of the resource, and
// its shape: its most trusted model statement and its count of the resource. A listing
// of thousands of members keeps these, not the nodes.
type DomainMember struct {
	Name, Domain string
	Outside      bool
	InService    bool
	Allocatable  int64
	Model, Count string
}

// Member reads node (a member of the pool its runwhere.ai/pool label names, whose pods
// request resource) for the domain view.
func (t Topology) Member(node *corev1.Node, resource corev1.ResourceName) DomainMember {
	m := DomainMember{Name: node.Name, InService: NodeOut(node, node.Labels[LabelPool], resource) == ""}
	var ok bool
	m.Domain, ok = t.DomainOf(node)
	m.Outside = !ok
	q := node.Status.Allocatable[resource]
	m.Allocatable = q.Value()
	if st := NodeModelStatements(node); len(st) > 0 {
		m.Model = st[0].Value
	}
	// The hardware, not allocatable: a device lost to the device plugin makes a member
	// out of shape for a while, not a domain mixed.
	c, ok := node.Status.Capacity[resource]
	if !ok {
		c = node.Status.Allocatable[resource]
	}
	m.Count = c.String()
	return m
}

// Domains is the view of members (a pool's nodes, each a member by its runwhere.ai/pool
// label, whose exclusive taint its pods tolerate) by unit domain: who is schedulable
// (NodeOut, the one capacity computation that also feeds the quota), the resource's
// allocatable and free on them (used: accelerators in use per node), each domain's
// state and whether it is mixed.
func (t Topology) Domains(members []*corev1.Node, used map[string]int64, resource corev1.ResourceName) DomainView {
	ms := make([]DomainMember, len(members))
	for i, n := range members {
		ms[i] = t.Member(n, resource)
	}
	return DomainsOf(ms, used)
}

// DomainsOf is the view of members read by Topology.Member (Domains).
func DomainsOf(members []DomainMember, used map[string]int64) DomainView {
	var v DomainView
	index := map[string]int{}
	shapes := map[string]*domainShape{}
	outside := &domainShape{}
	for i := range members {
		m := &members[i]
		if m.Outside {
			v.Outside = append(v.Outside, m.Name)
			v.OutsideFigures.add(m, used)
			outside.add(m)
			continue
		}
		i, seen := index[m.Domain]
		if !seen {
			i = len(v.Domains)
			index[m.Domain] = i
			v.Domains = append(v.Domains, Domain{Name: m.Domain})
			shapes[m.Domain] = &domainShape{}
		}
		v.Domains[i].add(m, used)
		shapes[m.Domain].add(m)
	}
	v.OutsideFigures.finish(outside)
	for i := range v.Domains {
		d := &v.Domains[i]
		d.finish(shapes[d.Name])
		if d.State == DomainWhole {
			v.LargestFreeBlock = max(v.LargestFreeBlock, d.Free)
			if d.Free == d.Total && d.Total > 0 {
				v.WholeFree++
			}
		}
	}
	slices.SortFunc(v.Domains, func(a, b Domain) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(v.Outside)
	return v
}

// add counts member m: schedulable when in service, with its allocatable and what its
// pods leave of it.
func (d *Domain) add(m *DomainMember, used map[string]int64) {
	d.Members = append(d.Members, m.Name)
	if !m.InService {
		return
	}
	d.Schedulable = append(d.Schedulable, m.Name)
	d.Total += m.Allocatable
	d.Free += max(m.Allocatable-used[m.Name], 0)
}

func (d *Domain) finish(shape *domainShape) {
	if len(d.Members) == 0 {
		return
	}
	slices.Sort(d.Members)
	slices.Sort(d.Schedulable)
	d.Mixed = shape.mixed
	d.State = domainState(len(d.Schedulable), len(d.Members))
}

func domainState(schedulable, members int) string {
	switch schedulable {
	case members:
		return DomainWhole
	case 0:
		return DomainOut
	}
	return DomainDegraded
}

// domainShape is the first accelerator model and per-node count seen in a domain, and
// whether a member differed.
type domainShape struct {
	model, count string
	mixed        bool
}

// add compares member m with the members seen: its most trusted model statement
// (compared with SameGPUModel) and its count of the resource. A member that says
// nothing about its model is not taken for another model.
func (s *domainShape) add(m *DomainMember) {
	if m.Model != "" {
		if s.model == "" {
			s.model = m.Model
		} else if !SameGPUModel(s.model, m.Model) {
			s.mixed = true
		}
	}
	if s.count == "" {
		s.count = m.Count
	} else if s.count != m.Count {
		s.mixed = true
	}
}

// Status is the bounded summary a Pool's status.topology holds: counts, the largest
// free block and the TopologyStatusDomains fullest (least free) and freest domains, so
// that thousands of domains keep the object small.
func (v DomainView) Status(unit string) *v1alpha1.TopologyStatus {
	st := &v1alpha1.TopologyStatus{Unit: unit, Domains: int32(len(v.Domains)), Outside: int32(len(v.Outside)),
		LargestFreeBlock: v.LargestFreeBlock, WholeFree: int32(v.WholeFree)}
	for _, d := range v.Domains {
		switch d.State {
		case DomainWhole:
			st.Whole++
		case DomainDegraded:
			st.Degraded++
		case DomainOut:
			st.Out++
		}
		if d.Mixed {
			st.Mixed++
		}
	}
	byFree := slices.Clone(v.Domains)
	// Ties go by name, so a status write repeats itself when nothing changed.
	slices.SortStableFunc(byFree, func(a, b Domain) int { return cmp.Compare(a.Free, b.Free) })
	n := min(len(byFree), TopologyStatusDomains)
	for _, d := range byFree[:n] {
		st.Fullest = append(st.Fullest, summary(d))
	}
	slices.SortStableFunc(byFree, func(a, b Domain) int {
		return cmp.Or(cmp.Compare(b.Free, a.Free), cmp.Compare(a.Name, b.Name))
	})
	for _, d := range byFree[:n] {
		st.Freest = append(st.Freest, summary(d))
	}
	return st
}

func summary(d Domain) v1alpha1.DomainSummary {
	return v1alpha1.DomainSummary{Name: d.Name, Nodes: int32(len(d.Members)), ReadyNodes: int32(len(d.Schedulable)),
		Total: d.Total, Free: d.Free, State: d.State}
}

// CheckTopology is rule R1 for a pool's spec.topology on create (old nil) and update:
// ResolveTopology's checks, and a floor (minNodesPerDomain) no current domain of the
// members is below. The floor is judged only when the topology is new or changed, so
// that a domain that lost members since does not block unrelated edits of the Pool.
func CheckTopology(pool, old *v1alpha1.Pool, members []*corev1.Node) error {
	if !HasTopology(pool) {
		return nil
	}
	t, err := ResolveTopology(pool.Spec.Topology)
	if err != nil {
		return err
	}
	if old != nil && equality.Semantic.DeepEqual(old.Spec.Topology, pool.Spec.Topology) {
		return nil
	}
	domains, _ := t.GroupByDomain(members)
	var small []string
	smallest := int(t.MinNodesPerDomain)
	for _, name := range slices.Sorted(maps.Keys(domains)) {
		if n := len(domains[name]); n < int(t.MinNodesPerDomain) {
			small = append(small, fmt.Sprintf("%q (%d)", name, n))
			smallest = min(smallest, n)
		}
	}
	if len(small) == 0 {
		return nil
	}
	const shown = 5
	more := ""
	if len(small) > shown {
		more = fmt.Sprintf(" and %d more", len(small)-shown)
		small = small[:shown]
	}
	return fieldViolationf("R1", "spec.topology.minNodesPerDomain",
		"spec.topology.minNodesPerDomain %d is above the members of domain %s%s of %s: a domain keeps at least that many while it stays in the pool; set it to %d or less, or add members to those domains first",
		t.MinNodesPerDomain, strings.Join(small, ", "), more, t.Unit, smallest)
}
