package policy

import corev1 "k8s.io/api/core/v1"

// UpgradeState is a node's place in the driver-upgrade state machine, stored in the
// node annotation runwhere.ai/upgrade-state.
type UpgradeState string

// The states, in the order a node passes through them.
const (
	UpgradeRequired UpgradeState = "upgrade-required"
	UpgradeCordon   UpgradeState = "cordon"
	UpgradeWaitJobs UpgradeState = "wait-for-jobs"
	UpgradeDrain    UpgradeState = "drain"
	UpgradeInstall  UpgradeState = "install"
	UpgradeValidate UpgradeState = "validate"
	UpgradeUncordon UpgradeState = "uncordon"
	UpgradeDone     UpgradeState = "done"
	UpgradeFailed   UpgradeState = "failed"
	// UpgradeAborted is a node that left its rollout (spec.abort) before it started;
	// it appears in a DriverRollout's status, never as a step a node takes.
	UpgradeAborted UpgradeState = "aborted"
)

// UpgradeInProgress says whether a node is between upgrade-required and done.
func UpgradeInProgress(node *corev1.Node) bool {
	switch UpgradeState(node.Annotations[AnnotationUpgradeState]) {
	case "", UpgradeDone, UpgradeFailed, UpgradeRequired:
		return false
	}
	return true
}
