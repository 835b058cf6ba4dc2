package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Per-domain gauges of pools with spec.topology (docs/topology.md). Their series are
// bounded by the operator's domains: a domain exists only as the members that share its
// labels, so a pool has at most as many as it has members, whoever writes the labels.
var (
	domainAcceleratorsTotal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_domain_accelerators_allocatable",
		Help: "Allocatable accelerators of a domain's schedulable members (get domains' ACCELERATORS total).",
	}, []string{"pool", "domain"})
	domainAcceleratorsFree = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_domain_accelerators_free",
		Help: "Accelerators of a domain's schedulable members that pods leave free.",
	}, []string{"pool", "domain"})
	domainNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_domain_nodes",
		Help: "A domain's members (state=total) and its schedulable ones (state=schedulable).",
	}, []string{"pool", "domain", "state"})
	domainState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_domain_state",
		Help: "1 for a domain's state (Whole, Degraded, Out), 0 for the others.",
	}, []string{"pool", "domain", "state"})
	largestFreeBlock = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_largest_free_block",
		Help: "The most accelerators free in one whole domain of the pool's unit level.",
	}, []string{"pool"})
)

var domainStates = []string{policy.DomainWhole, policy.DomainDegraded, policy.DomainOut}

// recordDomains sets the domain gauges from inv and deletes the series of domains (and
// pools) gone since seen, the set it returns for the next pass.
func recordDomains(inv *inventory.Inventory, seen map[[2]string]bool) map[[2]string]bool {
	now := map[[2]string]bool{}
	for name, p := range inv.Pools {
		if p.Domains == nil {
			continue
		}
		largestFreeBlock.WithLabelValues(name).Set(float64(p.Domains.LargestFreeBlock))
		now[[2]string{name, ""}] = true
		for _, d := range p.Domains.Domains {
			now[[2]string{name, d.Name}] = true
			domainAcceleratorsTotal.WithLabelValues(name, d.Name).Set(float64(d.Total))
			domainAcceleratorsFree.WithLabelValues(name, d.Name).Set(float64(d.Free))
			domainNodes.WithLabelValues(name, d.Name, "total").Set(float64(len(d.Members)))
			domainNodes.WithLabelValues(name, d.Name, "schedulable").Set(float64(len(d.Schedulable)))
			for _, s := range domainStates {
				v := 0.0
				if d.State == s {
					v = 1
				}
				domainState.WithLabelValues(name, d.Name, s).Set(v)
			}
		}
	}
	for key := range seen {
		if now[key] {
			continue
		}
		if key[1] == "" {
			largestFreeBlock.DeleteLabelValues(key[0])
			continue
		}
		for _, g := range []*prometheus.GaugeVec{domainAcceleratorsTotal, domainAcceleratorsFree, domainNodes, domainState} {
			g.DeletePartialMatch(prometheus.Labels{"pool": key[0], "domain": key[1]})
		}
	}
	return now
}
