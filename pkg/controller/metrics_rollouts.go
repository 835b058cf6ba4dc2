package controller

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// rolloutStepDeadline is when each node of a rollout under way times out of its present
// step. A node past its deadline is one the rollout reconciler should have failed or moved
// on: the alert LitepoolRolloutPastDeadline reads it, so a stuck rollout is seen even when
// the reconciler that would report it is the thing that is stuck.
var rolloutStepDeadline = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "litepool_rollout_step_deadline_timestamp_seconds",
	Help: "Unix time a node of a DriverRollout under way times out of its present step (wait-for-jobs, drain, install, validate), by rollout, pool, node and state.",
}, []string{"rollout", "pool", "node", "state"})

// RolloutDeadlineReconciler keeps rolloutStepDeadline on every DriverRollout's status. It
// reads rollouts only and writes nothing: apart from the rollout reconciler, so that its
// figures do not depend on the reconciler they watch.
type RolloutDeadlineReconciler struct {
	Client client.Client
}

// SetupWithManager watches DriverRollouts, status changes included (the deadlines live
// in status); leader only, as every controller of SetupIn.
func (r *RolloutDeadlineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("rollout-deadlines").For(&v1alpha1.DriverRollout{}).Complete(r)
}

// Reconcile replaces the rollout's series with its present deadlines; a rollout that is
// gone or finished has none.
func (r *RolloutDeadlineReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ro v1alpha1.DriverRollout
	err := r.Client.Get(ctx, req.NamespacedName, &ro)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	recordRolloutDeadlines(req.Name, &ro, err == nil && upgrade.Active(&ro))
	return reconcile.Result{}, nil
}

func recordRolloutDeadlines(name string, ro *v1alpha1.DriverRollout, active bool) {
	rolloutStepDeadline.DeletePartialMatch(prometheus.Labels{"rollout": name})
	if !active {
		return
	}
	for _, d := range upgrade.StepDeadlines(ro) {
		rolloutStepDeadline.WithLabelValues(name, ro.Spec.Pool, d.Node, string(d.State)).Set(float64(d.At.Unix()))
	}
}
