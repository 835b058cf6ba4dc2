package controller

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// RolloutReconciler drives DriverRollout objects with pkg/upgrade's Reconciler, the one
// the plugin runs when no controller does. It is level-triggered: every Reconcile reads
// the rollout and the cluster, does the steps that can be done now (none blocks), records
// them in the rollout's status and asks to be called again while the rollout is under
// way; no goroutine outlives a Reconcile. A new leader continues from the status, and
// makes no second installer Job (their names are fixed by rollout, node and attempt).
//
// Only a DriverRollout makes it act: node annotations are state it writes, and nothing
// written into one makes it create a Job. Its installer Jobs run in litepool's own
// namespace, never in one a spec names.
type RolloutReconciler struct {
	upgrade.Reconciler
}

// SetupWithManager registers the controller; it runs on the leader only. It watches
// DriverRollouts for spec changes (its own status updates do not wake it: it asks to be
// called again after Recheck while a rollout is under way).
func (r *RolloutReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recheck == 0 {
		r.Recheck = 2 * time.Second
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("driver-rollout").
		For(&v1alpha1.DriverRollout{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
