package inventory

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// PoolTopology is a pool's resolved spec.topology and the resource its domains count.
type PoolTopology struct {
	policy.Topology
	// Resource is the pool's spec.accelerator.resourceName; empty: the resource the
	// inventory finds on its members (as the pool's status shows).
	Resource corev1.ResourceName
}

// TopologiesOf resolves the topologies of the pools that declare one. A topology R1
// refuses (stored while the webhook was down) is left out: the pool shows no domains
// rather than domains of a guess.
func TopologiesOf(pools []v1alpha1.Pool) map[string]PoolTopology {
	var out map[string]PoolTopology
	for i := range pools {
		p := &pools[i]
		if !policy.HasTopology(p) {
			continue
		}
		t, err := policy.ResolveTopology(p.Spec.Topology)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]PoolTopology{}
		}
		out[p.Name] = PoolTopology{Topology: t, Resource: p.Spec.Accelerator.ResourceName}
	}
	return out
}

// tolerated is the accelerator resource whose NoSchedule taint a pod of pool tolerates
// (ExtendedResourceToleration), for NodeOut: the pool's spec.accelerator.resourceName
// where the pool has a topology that names it, so that the pool's free accelerators
// and its domains' add up alike; else the node's own accelerator.
func (b *Builder) tolerated(pool string, node corev1.ResourceName) corev1.ResourceName {
	if t, ok := b.Topologies[pool]; ok && t.Resource != "" {
		return t.Resource
	}
	return node
}

// keepForDomains keeps what the domain view reads of a member of a pool with a
// topology (policy.DomainMember, not the node), for Build. resource is the node's own
// accelerator: a pool that names none counts each member's.
func (b *Builder) keepForDomains(node *corev1.Node, pool string, resource corev1.ResourceName) {
	t, ok := b.Topologies[pool]
	if !ok {
		return
	}
	if b.domainMembers == nil {
		b.domainMembers = map[string][]policy.DomainMember{}
	}
	b.domainMembers[pool] = append(b.domainMembers[pool], t.Member(node, b.tolerated(pool, resource)))
}

// buildDomains gives each pool with a topology its domain view, from its kept members
// and the accelerators its pods use on them.
func (b *Builder) buildDomains(inv *Inventory) {
	for name, t := range b.Topologies {
		p := inv.Pools[name]
		if p == nil {
			continue
		}
		used := make(map[string]int64, len(p.Nodes))
		for _, n := range p.Nodes {
			used[n.Name] = n.Used
		}
		view := policy.DomainsOf(b.domainMembers[name], used)
		p.Topology, p.Domains = &t, &view
	}
	b.domainMembers = nil
}
