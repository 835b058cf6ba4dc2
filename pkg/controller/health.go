package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// HealthImages are the operator-approved image prefixes of health re-checks and
// remediation Jobs (litepool-webhook --health-images): a Pool's editor names the
// image, the operator who runs the controller approves it.
var HealthImages []string

// HealthReconciler runs pkg/health's loop, one Pool per request, driven by watches on
// Pools (spec, and the status the health verb writes), on member nodes and on the
// loop's own StressRuns.
type HealthReconciler struct {
	health.Reconciler
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *HealthReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("node-health").
		For(&v1alpha1.Pool{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(poolOfNode), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return healthFactsChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
			},
		})).
		Watches(&v1alpha1.StressRun{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			run := o.(*v1alpha1.StressRun)
			if !health.Selector().Matches(labels.Set(run.Labels)) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: run.Spec.Pool}}}
		})).
		Complete(r)
}

func poolOfNode(_ context.Context, o client.Object) []reconcile.Request {
	if p := o.GetLabels()[policy.LabelPool]; p != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p}}}
	}
	return nil
}

// healthFactsChanged lets through what the loop reads; heartbeats are not.
func healthFactsChanged(old, new *corev1.Node) bool {
	if !equality.Semantic.DeepEqual(old.Labels, new.Labels) || !equality.Semantic.DeepEqual(old.Spec.Taints, new.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, new.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Status.Capacity, new.Status.Capacity) || len(old.Status.Conditions) != len(new.Status.Conditions) {
		return true
	}
	for i := range new.Status.Conditions {
		o, n := old.Status.Conditions[i], new.Status.Conditions[i]
		if o.Type != n.Type || o.Status != n.Status || o.Reason != n.Reason || o.Message != n.Message {
			return true
		}
	}
	return false
}

// Reconcile takes one pool a step on.
func (r *HealthReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	after, err := r.Reconciler.Reconcile(ctx, req.Name)
	return reconcile.Result{RequeueAfter: after}, err
}
