package inventory

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Pool condition types the controller keeps on Pool objects.
const (
	ConditionDegraded      = "Degraded"
	ConditionBelowMinNodes = "BelowMinNodes"
	ConditionUpgrading     = "Upgrading"
)

// SetStatus writes a pool's figures into its status: the one place both `kubectl
// litepool get pools` and the controller turn an inventory into a PoolStatus.
// Conditions, ObservedAt and ObservedGeneration are left as they are.
func SetStatus(pool *v1alpha1.Pool, sum *Pool) {
	s := &pool.Status
	s.Phase = sum.Phase
	s.NodeCount = int32(len(sum.Nodes))
	s.HealthyNodes, s.FaultyNodes = int32(sum.Healthy), int32(sum.Faulty)
	s.AcceleratorResource = sum.Resource
	if pool.Spec.Accelerator.ResourceName != "" {
		s.AcceleratorResource = pool.Spec.Accelerator.ResourceName
	}
	s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree = sum.Total, sum.Used, sum.Free
	s.MIGSlices = nil
	for _, m := range sum.MIG {
		s.MIGSlices = append(s.MIGSlices, v1alpha1.MIGSliceStatus{Resource: m.Resource, Total: m.Total, Used: m.Used, Free: m.Free()})
	}
	s.DRA = DRAStatus(sum.DRA)
	s.GPUTypes, s.DriverVersions = sum.GPUTypes, sum.DriverVersions
	s.NodeStates, s.UpgradeStates = countMap(sum.NodeStates), countMap(sum.UpgradeStates)
	s.Topology = nil
	if sum.Domains != nil {
		s.Topology = sum.Domains.Status(sum.Topology.Unit)
	}
}

func countMap[K ~string](m map[K]int) map[string]int32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int32, len(m))
	for k, v := range m {
		out[string(k)] = int32(v)
	}
	return out
}

// Conditions are a pool's Degraded, BelowMinNodes and Upgrading conditions, computed
// from its inventory and its spec (minNodes). LastTransitionTime is left for the caller
// (meta.SetStatusCondition keeps it while the status stays the same).
func Conditions(pool *v1alpha1.Pool, sum *Pool) []metav1.Condition {
	minNodes := max(pool.Spec.MinNodes, 1)
	return []metav1.Condition{
		degraded(sum),
		belowMinNodes(sum, minNodes),
		upgrading(sum),
	}
}

func degraded(sum *Pool) metav1.Condition {
	c := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AllNodesRunning",
		Message: "every member node is Running"}
	if len(sum.Nodes) == 0 {
		c.Reason, c.Message = "NoNodes", "the pool has no member nodes"
	}
	if sum.Faulty > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, "NodesNotRunning"
		c.Message = fmt.Sprintf("%d of %d member nodes are not Running: %s", sum.Faulty, len(sum.Nodes), describeStates(sum.NodeStates))
	}
	return c
}

// belowMinNodes compares the Ready members (those the accelerator total counts) with
// spec.minNodes.
func belowMinNodes(sum *Pool, minNodes int32) metav1.Condition {
	c := metav1.Condition{Type: ConditionBelowMinNodes, Status: metav1.ConditionFalse, Reason: "EnoughReadyNodes",
		Message: fmt.Sprintf("%d Ready member nodes, minNodes %d", sum.ReadyNodes, minNodes)}
	if int32(sum.ReadyNodes) < minNodes {
		c.Status, c.Reason = metav1.ConditionTrue, "TooFewReadyNodes"
	}
	return c
}

func upgrading(sum *Pool) metav1.Condition {
	c := metav1.Condition{Type: ConditionUpgrading, Status: metav1.ConditionFalse, Reason: "NoUpgrade",
		Message: "no member node is being upgraded"}
	if n := sum.NodeStates[policy.NodeUpgrading]; n > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, "NodesUpgrading"
		c.Message = fmt.Sprintf("%d member nodes are mid-upgrade", n)
	}
	if n := sum.UpgradeStates[policy.UpgradeFailed]; n > 0 {
		c.Reason = "UpgradeFailed"
		c.Message = fmt.Sprintf("%d member nodes failed their driver upgrade", n)
		if sum.NodeStates[policy.NodeUpgrading] > 0 {
			c.Message = fmt.Sprintf("%d member nodes are mid-upgrade, %d failed", sum.NodeStates[policy.NodeUpgrading], n)
		}
	}
	return c
}

// describeStates is "NotReady 1, Cordoned 2" for the states other than Running.
func describeStates(states map[policy.NodeState]int) string {
	var parts []string
	for s, n := range states {
		if s != policy.NodeRunning && n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
