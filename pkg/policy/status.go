package policy

import (
	corev1 "k8s.io/api/core/v1"
)

// NodeState is the status model of a node as litepool shows it.
type NodeState string

const (
	NodeRunning   NodeState = "Running"
	NodeNotReady  NodeState = "NotReady"
	NodeCordoned  NodeState = "Cordoned"
	NodeDraining  NodeState = "Draining"
	NodeUpgrading NodeState = "Upgrading"
	NodeDegraded  NodeState = "Degraded"
)

// Pool phases.
const (
	PoolRunning   = "Running"
	PoolDegraded  = "Degraded"
	PoolEmpty     = "Empty"
	PoolUpgrading = "Upgrading"
)

// IsNodeReady says whether the node's Ready condition is True.
func IsNodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StateOfNode places a node in the status model. The first that applies wins:
// NotReady, Upgrading, Draining, Degraded (failed a stress test), Cordoned, Running.
func StateOfNode(node *corev1.Node) NodeState {
	switch {
	case !IsNodeReady(node):
		return NodeNotReady
	case UpgradeInProgress(node):
		return NodeUpgrading
	case node.Annotations[AnnotationDraining] != "":
		return NodeDraining
	case node.Labels[LabelHealth] == HealthDegraded:
		return NodeDegraded
	case node.Spec.Unschedulable:
		return NodeCordoned
	}
	return NodeRunning
}

// PoolPhase sums up member states: Empty with no members, Upgrading while any member
// upgrades, Degraded when any member is not Running, else Running.
func PoolPhase(states []NodeState) string {
	if len(states) == 0 {
		return PoolEmpty
	}
	phase := PoolRunning
	for _, s := range states {
		if s == NodeUpgrading {
			return PoolUpgrading
		}
		if s != NodeRunning {
			phase = PoolDegraded
		}
	}
	return phase
}

// PoolOf is the pool a node belongs to: its runwhere.ai/pool label, or "default".
func PoolOf(node *corev1.Node) string {
	if p := node.Labels[LabelPool]; p != "" {
		return p
	}
	return DefaultPool
}
