package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Per-pool gauges, kept by the leader's status controller for every pool it lists:
// Pool objects, label-only pools and "default". Figures are those of `kubectl litepool
// get pools` (pkg/inventory).
var (
	acceleratorsTotal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_accelerators_allocatable",
		Help: "Allocatable accelerators of a pool's nodes (get pools' GPU TOTAL), by pool and resource.",
	}, []string{"pool", "resource"})
	acceleratorsUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_accelerators_used",
		Help: "Accelerators requested by non-terminal pods on a pool's nodes (GPU USED), by pool and resource.",
	}, []string{"pool", "resource"})
	acceleratorsFree = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_accelerators_free",
		Help: "Allocatable minus used accelerators of a pool's nodes in service (Ready, not cordoned, quarantined, upgrading or tainted beyond what its pods tolerate), each at least 0 (GPU FREE), by pool and resource.",
	}, []string{"pool", "resource"})
	poolNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_nodes",
		Help: "Member nodes of a pool by node state (Running, NotReady, Cordoned, Draining, Upgrading, Degraded).",
	}, []string{"pool", "state"})
	upgradeNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_upgrade_nodes",
		Help: "Member nodes of a pool by driver-upgrade state (runwhere.ai/upgrade-state); nodes never upgraded are not counted.",
	}, []string{"pool", "state"})
	minNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_min_nodes",
		Help: "spec.minNodes of a Pool object (label-only pools have none).",
	}, []string{"pool"})
	poolCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_condition",
		Help: "1 when a pool's condition (Degraded, BelowMinNodes, Upgrading) is True, else 0. BelowMinNodes only for Pool objects.",
	}, []string{"pool", "condition"})
	// Node health loop (pkg/health), set from each Pool's status by HealthReconciler.
	quarantinedNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_quarantined_nodes",
		Help: "Members of a pool the health loop holds out of scheduling (status.quarantinedNodes).",
	}, []string{"pool"})
	healthBreakerTripped = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_health_breaker_tripped",
		Help: "1 when a faulty member of a pool was left in service because spec.health.maxQuarantinedPercent is reached.",
	}, []string{"pool"})
	healthHeldOut = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_health_held_out_nodes",
		Help: "Members of a pool held out until released by hand, by reason (Flapping, RecheckFailed, RemediationFailed, HeldByHand, ImageNotApproved, NoDefinition, Unaccounted).",
	}, []string{"pool", "reason"})
	statusUpdate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_status_last_sync_timestamp_seconds",
		Help: "Unix time the status controller last recomputed every pool (the leader only).",
	}, nil)
)

// Gauges are every metric the controller registers, for tests that check dashboards and
// alerts use only these.
var Gauges = []*prometheus.GaugeVec{acceleratorsTotal, acceleratorsUsed, acceleratorsFree,
	poolNodes, upgradeNodes, minNodes, poolCondition, statusUpdate,
	quarantinedNodes, healthBreakerTripped, healthHeldOut, draDevices, queueQuota, queueWorkloads,
	domainAcceleratorsTotal, domainAcceleratorsFree, domainNodes, domainState, largestFreeBlock, rolloutStepDeadline}

// MetricNames are the names of Gauges.
var MetricNames = []string{
	"litepool_pool_accelerators_allocatable", "litepool_pool_accelerators_used", "litepool_pool_accelerators_free",
	"litepool_pool_nodes", "litepool_pool_upgrade_nodes", "litepool_pool_min_nodes", "litepool_pool_condition",
	"litepool_pool_status_last_sync_timestamp_seconds",
	"litepool_pool_quarantined_nodes", "litepool_pool_health_breaker_tripped", "litepool_pool_health_held_out_nodes",
	"litepool_pool_dra_devices", "litepool_pool_queue_quota", "litepool_pool_queue_workloads",
	"litepool_pool_domain_accelerators_allocatable", "litepool_pool_domain_accelerators_free",
	"litepool_pool_domain_nodes", "litepool_pool_domain_state", "litepool_pool_largest_free_block",
	"litepool_rollout_step_deadline_timestamp_seconds",
}

func init() {
	for _, g := range Gauges {
		metrics.Registry.MustRegister(g)
	}
}

var nodeStates = []policy.NodeState{policy.NodeRunning, policy.NodeNotReady, policy.NodeCordoned,
	policy.NodeDraining, policy.NodeUpgrading, policy.NodeDegraded}

var upgradeStates = []policy.UpgradeState{policy.UpgradeRequired, policy.UpgradeCordon, policy.UpgradeWaitJobs,
	policy.UpgradeDrain, policy.UpgradeInstall, policy.UpgradeValidate, policy.UpgradeUncordon,
	policy.UpgradeDone, policy.UpgradeFailed}

// poolMetrics sets the gauges from one inventory and forgets the series of pools (and
// resources) that are gone, so a deleted pool stops being reported.
type poolMetrics struct {
	mu   sync.Mutex
	seen map[string]string // pool -> resource label last set
	// draSeen is the DRA rows last set (metrics_dra.go).
	draSeen map[[4]string]bool
	// domainsSeen is the pools and domains last set (metrics_domains.go).
	domainsSeen map[[2]string]bool
}

func (m *poolMetrics) record(inv *inventory.Inventory, objects map[string]*v1alpha1.Pool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := map[string]string{}
	for name, sum := range inv.Pools {
		resource := string(sum.Resource)
		if obj := objects[name]; obj != nil && obj.Spec.Accelerator.ResourceName != "" {
			resource = string(obj.Spec.Accelerator.ResourceName)
		}
		if old, ok := m.seen[name]; ok && old != resource {
			deleteAccelerators(name, old)
		}
		now[name] = resource
		acceleratorsTotal.WithLabelValues(name, resource).Set(float64(sum.Total))
		acceleratorsUsed.WithLabelValues(name, resource).Set(float64(sum.Used))
		acceleratorsFree.WithLabelValues(name, resource).Set(float64(sum.Free))
		for _, s := range nodeStates {
			poolNodes.WithLabelValues(name, string(s)).Set(float64(sum.NodeStates[s]))
		}
		for _, s := range upgradeStates {
			upgradeNodes.WithLabelValues(name, string(s)).Set(float64(sum.UpgradeStates[s]))
		}
		m.recordConditions(name, sum, objects[name])
	}
	for name, resource := range m.seen {
		if _, ok := now[name]; !ok {
			deleteAccelerators(name, resource)
			for _, g := range []*prometheus.GaugeVec{poolNodes, upgradeNodes, minNodes, poolCondition} {
				g.DeletePartialMatch(prometheus.Labels{"pool": name})
			}
		}
	}
	m.seen = now
	m.draSeen = recordDRA(inv, m.draSeen)
	m.domainsSeen = recordDomains(inv, m.domainsSeen)
}

func (m *poolMetrics) recordConditions(name string, sum *inventory.Pool, obj *v1alpha1.Pool) {
	if obj == nil {
		minNodes.DeleteLabelValues(name)
		poolCondition.DeleteLabelValues(name, inventory.ConditionBelowMinNodes)
		obj = &v1alpha1.Pool{}
	} else {
		minNodes.WithLabelValues(name).Set(float64(max(obj.Spec.MinNodes, 1)))
	}
	for _, c := range inventory.Conditions(obj, sum) {
		if c.Type == inventory.ConditionBelowMinNodes && obj.Name == "" {
			continue
		}
		v := 0.0
		if c.Status == "True" {
			v = 1
		}
		poolCondition.WithLabelValues(name, c.Type).Set(v)
	}
}

func deleteAccelerators(pool, resource string) {
	for _, g := range []*prometheus.GaugeVec{acceleratorsTotal, acceleratorsUsed, acceleratorsFree} {
		g.DeleteLabelValues(pool, resource)
	}
}
