package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// RolloutReconciler drives DriverRollout objects with pkg/upgrade's Reconciler, the one
// the plugin runs when no controller does. It is level-triggered: every Reconcile reads
// the rollout and the cluster, does the steps that can be done now (none blocks) and
// records them in the rollout's status; no goroutine outlives a Reconcile. A new leader
// continues from the status, and makes no second installer Job (their names are fixed
// by rollout, node and attempt).
//
// What a rollout waits for wakes it: its installer Jobs (the node-work cache), the
// nodes it counts (Ready, cordon, the driver-version label) and the pods on its nodes
// (the pod index: a drain or a wait for workloads ends when they go). It asks to run
// again on a timer only for time itself: a timeout, an eviction a disruption budget
// refused.
//
// Only a DriverRollout makes it act: node annotations are state it writes, and nothing
// written into one makes it create a Job. Its installer Jobs run in litepool's own
// namespace, never in one a spec names.
type RolloutReconciler struct {
	upgrade.Reconciler
	// Work is the node-work cache (NodeWorkCache): installer Jobs are read and watched there.
	Work cache.Cache
}

// SetupWithManager registers the controller; it runs on the leader only. It watches
// DriverRollouts for spec changes (its own status updates do not wake it), its Jobs,
// the nodes and the pods on them.
func (r *RolloutReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("driver-rollout").
		For(&v1alpha1.DriverRollout{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfNode), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return rolloutFactsChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
			},
		}))
	r.Nodes = mgr.GetClient()
	if r.Work != nil {
		r.Jobs, r.Watched = r.Work, r.Pods != nil
		b = b.WatchesRawSource(jobsOwnedBy(mgr, r.Work, &v1alpha1.DriverRollout{}))
	}
	if r.Pods != nil {
		b = b.WatchesRawSource(&source.Informer{Informer: r.Pods.Informer(), Handler: handler.EnqueueRequestsFromMapFunc(r.rolloutsOfPod)})
	}
	return b.Complete(r)
}

// rolloutsOfNode is every rollout under way the node counts for: one that names it, or
// one of its pool (all members count for maxUnavailable).
func (r *RolloutReconciler) rolloutsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	return r.rolloutsHolding(ctx, o.GetName(), o.GetLabels()[policy.LabelPool])
}

// rolloutsOfPod is every rollout under way that holds the pod's node: a pod that goes
// may end a drain or a wait for workloads, one that comes may make a node busy.
func (r *RolloutReconciler) rolloutsOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	e, ok := o.(*podindex.Entry)
	if !ok || e.NodeName == "" {
		return nil
	}
	return r.rolloutsHolding(ctx, e.NodeName, "")
}

func (r *RolloutReconciler) rolloutsHolding(ctx context.Context, node, pool string) []reconcile.Request {
	var list v1alpha1.DriverRolloutList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		ro := &list.Items[i]
		if !upgrade.Active(ro) {
			continue
		}
		held := pool != "" && ro.Spec.Pool == pool
		for _, n := range ro.Status.Nodes {
			held = held || n.Name == node
		}
		if held {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: ro.Name}})
		}
	}
	return out
}

// rolloutFactsChanged lets through what a rollout reads of a node: its labels (the
// pool, the driver version), its cordon, its Ready condition.
func rolloutFactsChanged(old, new *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Labels, new.Labels) || old.Spec.Unschedulable != new.Spec.Unschedulable ||
		policy.IsNodeReady(old) != policy.IsNodeReady(new)
}
