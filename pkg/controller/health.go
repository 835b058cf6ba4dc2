package controller

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
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
	"github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// HealthImages are the operator's approvals (--health-images of the controller's
// Deployment; entries as policy.ImageApproved reads them) of the stress images a Pool's
// re-check may run when it names no definition. Remediations never run a Pool's image.
var HealthImages []string

// HealthDefinitions are the operator's remediations and re-checks by name
// (--health-definition of the controller's Deployment): a Pool only names one, and
// these are the only images and commands the loop runs as node work.
var HealthDefinitions map[string]health.Definition

// HealthReconciler runs pkg/health's loop, one Pool per request, driven by watches on
// Pools (spec, where the health verb writes its orders), on member nodes, on the
// loop's own StressRuns and on its remediation Jobs (the node-work cache).
type HealthReconciler struct {
	health.Reconciler
	// Work is the node-work cache (NodeWorkCache): remediation Jobs are read and
	// watched there.
	Work cache.Cache
	// Pods is the pod index: a change of a pod on a quarantined node wakes its pool, so
	// a drain goes on when its pods go.
	Pods *podindex.Index
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *HealthReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
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
		}))
	r.Live = mgr.GetAPIReader()
	if r.Work != nil {
		r.Jobs = r.Work
		b = b.WatchesRawSource(jobsOwnedBy(mgr, r.Work, &v1alpha1.Pool{}))
	}
	if r.Pods != nil {
		b = b.WatchesRawSource(&source.Informer{Informer: r.Pods.Informer(), Handler: handler.EnqueueRequestsFromMapFunc(r.poolOfPod)})
	}
	if r.DRA {
		b = b.Watches(&resourcev1.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(r.poolOfSliceNode),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}

// poolOfSliceNode is the pool of the node a driver published a slice for: a device
// taint there is a fault of that node. Slices of devices on several nodes are read
// on the pool's next pass.
func (r *HealthReconciler) poolOfSliceNode(ctx context.Context, o client.Object) []reconcile.Request {
	slice := o.(*resourcev1.ResourceSlice)
	if slice.Spec.NodeName == nil {
		return nil
	}
	var node corev1.Node
	if err := r.Client.Get(ctx, client.ObjectKey{Name: *slice.Spec.NodeName}, &node); err != nil {
		return nil
	}
	return poolOfNode(ctx, &node)
}

// poolOfPod is the pool of the pod's node when the node is quarantined: only there
// does the loop wait for pods (a drain); elsewhere a pod's change is none of its news.
func (r *HealthReconciler) poolOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	e, ok := o.(*podindex.Entry)
	if !ok || e.NodeName == "" {
		return nil
	}
	var node corev1.Node
	if err := r.Client.Get(ctx, client.ObjectKey{Name: e.NodeName}, &node); err != nil {
		return nil
	}
	for _, t := range node.Spec.Taints {
		if t.Key == policy.TaintQuarantine {
			return poolOfNode(ctx, &node)
		}
	}
	return nil
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

// Reconcile takes one pool a step on, then sets the pool's health gauges from its
// status (the status write brings the pool back here, so they follow it).
func (r *HealthReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.Reconciler.Reconcile(ctx, req)
	var pool v1alpha1.Pool
	if getErr := r.Client.Get(ctx, client.ObjectKey{Name: req.Name}, &pool); getErr != nil || pool.Spec.Health == nil {
		for _, g := range []*prometheus.GaugeVec{quarantinedNodes, healthBreakerTripped, healthHeldOut} {
			g.DeletePartialMatch(prometheus.Labels{"pool": req.Name})
		}
		return res, err
	}
	recordHealth(&pool)
	return res, err
}

// heldOutReasons are the reasons a node is held out until released by hand; each has
// a series, 0 when no member has it, so alerts can compare.
var heldOutReasons = []string{policy.ReasonFlapping, policy.ReasonRecheckFailed, policy.ReasonRemediationFailed,
	policy.ReasonHeldByHand, health.ReasonImageNotApproved, health.ReasonNoDefinition, policy.ReasonUnaccounted}

func recordHealth(p *v1alpha1.Pool) {
	quarantinedNodes.WithLabelValues(p.Name).Set(float64(p.Status.QuarantinedNodes))
	tripped := 0.0
	if p.Status.BreakerTripped {
		tripped = 1
	}
	healthBreakerTripped.WithLabelValues(p.Name).Set(tripped)
	counts := map[string]int{}
	for _, e := range p.Status.NodeHealth {
		if e.State == v1alpha1.NodeHealthHeldOut {
			counts[e.Reason]++
		}
	}
	for _, reason := range heldOutReasons {
		healthHeldOut.WithLabelValues(p.Name, reason).Set(float64(counts[reason]))
	}
}
