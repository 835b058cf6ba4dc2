package policy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// The node rules' part of a pool's topology (issue 40): N3 keeps each unit domain's
// floor (minNodesPerDomain) against departures by any client, and N2 keeps a domain of
// one compute specification when a node joins the pool into it. Topology labels are
// written by their own agents (feature discovery, the Ascend plugin) and are never
// refused: a domain that a label write makes mixed is shown as mixed, not refused.

// DomainCounter is a NodeCatalog that knows a pool's members by unit domain. The
// webhook's catalog counts them from its informer cache, less the departures already
// granted (the same reservation that serialises the pool floor, so concurrent
// departures from one domain are judged one after the other).
type DomainCounter interface {
	// DomainAfter lists the members of pool in domain (sorted), and counts those in
	// service (NodeOut is "") other than node and the departures already granted.
	DomainAfter(pool, node string, t Topology, domain string) (members []string, inService int)
	// DomainPeers are the members of pool in domain other than node.
	DomainPeers(pool, node string, t Topology, domain string) []*corev1.Node
}

// DomainLeave is what N3 knows of a departure from a unit domain.
type DomainLeave struct {
	Domain  string
	Members []string
	// StayInService counts the domain's members in service once the node has left.
	StayInService int
	Floor         int
}

// domainLeave fills in the domain a node in service leaves with its pool; nil when the
// pool has no (valid) topology, the node is outside every domain or out of service, or
// the catalog cannot count domains.
func domainLeave(pool *v1alpha1.Pool, old *corev1.Node, pools NodeCatalog) *DomainLeave {
	dc, ok := pools.(DomainCounter)
	if !ok || !HasTopology(pool) || NodeOut(old, pool.Name, pool.Spec.Accelerator.ResourceName) != "" {
		return nil
	}
	t, err := ResolveTopology(pool.Spec.Topology)
	if err != nil {
		return nil // R1 refuses such a pool; its minNodes still holds
	}
	d, ok := t.DomainOf(old)
	if !ok {
		return nil
	}
	members, inService := dc.DomainAfter(pool.Name, old.Name, t, d)
	return &DomainLeave{Domain: d, Members: members, StayInService: inService, Floor: int(t.MinNodesPerDomain)}
}

// checkDomainLeave is N3's per-domain floor for one departure of a member in service:
// the domain keeps 0 (it has left, or is out of service) or at least minNodesPerDomain
// members in service. A domain therefore leaves whole by being cordoned first, as
// `kubectl litepool scale --remove` does with every node it removes.
func checkDomainLeave(l Leave) error {
	d := l.Domain
	if d == nil || d.StayInService == 0 || d.StayInService >= d.Floor {
		return nil
	}
	return Violationf("N3", "node %q cannot leave pool %q: its domain %q (%d node(s): %s) would keep %d node(s) in service, below minNodesPerDomain %d; a domain leaves whole: cordon its nodes first (kubectl litepool scale %s --remove %s does), or lower spec.topology.minNodesPerDomain",
		l.Node, l.PoolName, d.Domain, len(d.Members), summarize(d.Members, 8), d.StayInService, d.Floor, l.PoolName, strings.Join(d.Members, ","))
}

// ComputeSpec is what N2 compares across a domain's members: the accelerator model and
// how many whole accelerators each node offers (allocatable, of the known resources).
type ComputeSpec struct {
	Model string
	Count int64
}

// ComputeSpecOf reads a node's compute specification.
func ComputeSpecOf(node *corev1.Node) ComputeSpec {
	_, n := Accelerators{}.NodeAccelerators(node)
	return ComputeSpec{Model: GPUType(node), Count: n}
}

// differs says whether two specifications contradict each other; what one of them does
// not state yet (no model label, no device plugin) is not judged.
func (s ComputeSpec) differs(o ComputeSpec) bool {
	return (s.Model != "" && o.Model != "" && !SameGPUModel(s.Model, o.Model)) || (s.Count > 0 && o.Count > 0 && s.Count != o.Count)
}

func (s ComputeSpec) String() string {
	return fmt.Sprintf("%s, %d accelerator(s)", orNone(s.Model), s.Count)
}

// checkDomainJoin is N2 for a node that joins a pool with a topology: the members of
// the domain it joins must be of its compute specification (the seed's "same compute
// specification" of a super node). Only the join is judged, never the topology labels.
func checkDomainJoin(pool *v1alpha1.Pool, node *corev1.Node, pools NodeCatalog) error {
	dc, ok := pools.(DomainCounter)
	if !ok || !HasTopology(pool) {
		return nil
	}
	t, err := ResolveTopology(pool.Spec.Topology)
	if err != nil {
		return nil
	}
	d, ok := t.DomainOf(node)
	if !ok {
		return nil
	}
	mine := ComputeSpecOf(node)
	for _, peer := range dc.DomainPeers(pool.Name, node.Name, t, d) {
		if theirs := ComputeSpecOf(peer); mine.differs(theirs) {
			return Violationf("N2", "node %q (%s) cannot join pool %q in domain %q: its member %s is %s, and a domain is one compute specification; choose a node of that specification, or one of another domain",
				node.Name, mine, pool.Name, d, peer.Name, theirs)
		}
	}
	return nil
}
