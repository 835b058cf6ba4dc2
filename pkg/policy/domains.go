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

// Domains is the view of members (a pool's nodes, each a member by its runwhere.ai/pool
// label, whose exclusive taint its pods tolerate) by unit domain: who is schedulable
// (NodeOut, the one capacity computation that also feeds the quota), the resource's
// allocatable and free on them (used: accelerators in use per node), each domain's
// state and whether it is mixed.
func (t Topology) Domains(members []*corev1.Node, used map[string]int64, resource corev1.ResourceName) DomainView {
	var v DomainView
	index := map[string]int{}
	shapes := map[string]*domainShape{}
	outside := &domainShape{}
	for _, n := range members {
		name, ok := t.DomainOf(n)
		if !ok {
			v.Outside = append(v.Outside, n.Name)
			v.OutsideFigures.add(n, used, resource)
			outside.add(n, resource)
			continue
		}
		i, seen := index[name]
		if !seen {
			i = len(v.Domains)
			index[name] = i
			v.Domains = append(v.Domains, Domain{Name: name})
			shapes[name] = &domainShape{}
		}
		v.Domains[i].add(n, used, resource)
		shapes[name].add(n, resource)
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

// add counts member n: schedulable when NodeOut says so, with its allocatable and
// what its pods leave of it.
func (d *Domain) add(n *corev1.Node, used map[string]int64, resource corev1.ResourceName) {
	d.Members = append(d.Members, n.Name)
	if NodeOut(n, n.Labels[LabelPool], resource) != "" {
		return
	}
	d.Schedulable = append(d.Schedulable, n.Name)
	q := n.Status.Allocatable[resource]
	d.Total += q.Value()
	d.Free += max(q.Value()-used[n.Name], 0)
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

// add compares node with the members seen: its most trusted model statement
// (NodeModelStatements' first, compared with SameGPUModel) and its capacity of the
// resource (the hardware, not allocatable: a device lost to the device plugin makes a
// member out of shape for a while, not a domain mixed). A member that says nothing
// about its model is not taken for another model.
func (s *domainShape) add(n *corev1.Node, resource corev1.ResourceName) {
	if st := NodeModelStatements(n); len(st) > 0 {
		if s.model == "" {
			s.model = st[0].Value
		} else if !SameGPUModel(s.model, st[0].Value) {
			s.mixed = true
		}
	}
	q, ok := n.Status.Capacity[resource]
	if !ok {
		q = n.Status.Allocatable[resource]
	}
	count := q.String()
	if s.count == "" {
		s.count = count
	} else if s.count != count {
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

// DomainNode is a copy of node holding only what Domains and NodeOut read: its name,
// the topology's level labels, the pool and model labels, litepool's annotations, the
// Ready condition, the cordon, the NoSchedule and NoExecute taints, and the extended
// resources' allocatable and capacity. A listing of thousands of members keeps these
// instead of whole nodes.
func DomainNode(node *corev1.Node, t Topology) *corev1.Node {
	out := &corev1.Node{}
	out.Name = node.Name
	out.Labels = make(map[string]string, len(t.Levels)+2)
	for _, l := range append(slices.Clip(t.Levels), LabelPool, LabelGPUType, LabelNVIDIAProduct, LabelNPUChipName, LabelAscendFamily) {
		if v, ok := node.Labels[l]; ok {
			out.Labels[l] = v
		}
	}
	for k, v := range node.Annotations {
		if strings.HasPrefix(k, Prefix) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.Unschedulable = node.Spec.Unschedulable
	for _, taint := range node.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			out.Spec.Taints = append(out.Spec.Taints, taint)
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	out.Status.Allocatable = extendedResources(node.Status.Allocatable)
	out.Status.Capacity = extendedResources(node.Status.Capacity)
	return out
}

// extendedResources are the entries of l named with a domain (nvidia.com/gpu, not cpu).
func extendedResources(l corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range l {
		if strings.Contains(string(name), "/") {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
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
