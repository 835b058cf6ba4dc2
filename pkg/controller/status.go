// Package controller is litepool's in-cluster controllers, run by litepool-webhook on
// the replica that holds the leader lease: every Pool's status and the per-pool
// metrics, computed with the same code as `kubectl litepool get pools` (pkg/inventory)
// from the manager's informer cache; and the driver rollouts and stress runs that
// `upgrade driver` and `stress run` hand over to the cluster.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// everyPool is the one work item of the status controller: any change to a node, a pod
// or a Pool can move figures between pools, and one pass over the cache recomputes
// them all. The workqueue folds a burst of events into one pass.
var everyPool = reconcile.Request{NamespacedName: types.NamespacedName{Name: "every-pool"}}

// BatchDelay is how long a node or pod change waits for others before the pass that
// counts it: a rollout or a job of 1,000 pods costs one pass, not 1,000.
var BatchDelay = 250 * time.Millisecond

// StatusResync is how often the leader recomputes every pool when nothing changed. It
// keeps litepool_pool_status_last_sync_timestamp_seconds advancing in a quiet cluster,
// so that a stale timestamp means a controller that is down or not leading
// (LitepoolControllerStatusStale, docs/runbook.md), not a cluster at rest.
var StatusResync = time.Minute

// StatusReconciler keeps Pool status and the per-pool gauges.
type StatusReconciler struct {
	Client   client.Client // reads from the cache, writes pools/status
	Recorder events.EventRecorder
	// Pods and Nodes, when set, are the informers' stores: a pass reads their objects
	// in place instead of listing them through Client (which copies every object
	// into a new list: 40,000 pods' worth of garbage a pass). Pods holds
	// *podindex.Entry, Nodes *corev1.Node.
	Pods, Nodes store
	// PodIndex is where Pods comes from and whose changes start a pass: the manager's
	// cache keeps no pods (cmd/webhook). SetupWithManager needs it.
	PodIndex *podindex.Index
	// Accelerators says which resources are counted; the zero value is the known set.
	Accelerators policy.Accelerators
	metrics      poolMetrics
	now          func() time.Time

	// DRA counts DRA devices too (the cluster serves resource.k8s.io/v1; dra.go).
	DRA bool
}

// store is what a pass needs of an informer's indexer.
type store interface{ List() []any }

// informerStore returns the store of the cache's informer for obj, or nil when the
// cache is not informer-backed.
func informerStore(c cache.Cache, obj client.Object) (store, error) {
	inf, err := c.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	if sii, ok := inf.(toolscache.SharedIndexInformer); ok {
		return sii.GetIndexer(), nil
	}
	return nil, nil
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.now == nil {
		r.now = time.Now
	}
	if r.PodIndex == nil {
		return errors.New("the Pool status controller needs the pod index")
	}
	r.Pods = r.PodIndex.Informer().GetIndexer()
	b := ctrl.NewControllerManagedBy(mgr).
		Named("pool-status").
		Watches(&v1alpha1.Pool{}, enqueue(0, poolSpecChanged)).
		Watches(&corev1.Node{}, enqueue(BatchDelay, nodeChanged)).
		WatchesRawSource(&source.Informer{Informer: r.PodIndex.Informer(), Handler: enqueue(BatchDelay, podChanged)})
	if r.DRA {
		b = watchDRA(b)
	}
	return b.Complete(r)
}

// Reconcile recomputes every pool from the cache, sets the gauges and writes the
// status of each Pool object whose figures or conditions changed.
func (r *StatusReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var pools v1alpha1.PoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		return reconcile.Result{}, err
	}
	inv, err := r.inventory(ctx, pools.Items)
	if err != nil {
		return reconcile.Result{}, err
	}
	objects := make(map[string]*v1alpha1.Pool, len(pools.Items))
	for i := range pools.Items {
		objects[pools.Items[i].Name] = &pools.Items[i]
	}
	r.metrics.record(inv, objects)
	statusUpdate.WithLabelValues().SetToCurrentTime()
	var errs []error
	for _, pool := range objects {
		if err := r.updateStatus(ctx, pool, inv.Pools[pool.Name]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return reconcile.Result{}, fmt.Errorf("updating pool status: %v", errs)
	}
	return reconcile.Result{RequeueAfter: StatusResync}, nil
}

// inventory builds the inventory as `get pools` does, from the cache: pods first, then
// nodes. The cache's objects are read in place (no deep copy of 40,000 pods).
func (r *StatusReconciler) inventory(ctx context.Context, pools []v1alpha1.Pool) (*inventory.Inventory, error) {
	b := inventory.NewBuilder()
	b.WithoutLabels = true
	b.Accelerators = r.Accelerators
	b.Topologies = inventory.TopologiesOf(pools)
	var err error
	if b.DRA, err = r.draNodes(ctx); err != nil {
		return nil, err
	}
	// Pods before nodes: AddNode reads the usage of the pods added so far.
	if err := r.addPods(ctx, b); err != nil {
		return nil, err
	}
	if err := r.addNodes(ctx, b); err != nil {
		return nil, err
	}
	names := make([]string, len(pools))
	for i := range pools {
		names[i] = pools[i].Name
	}
	return b.Build(names...), nil
}

// addPods adds every pod from the pod index, or, where a unit test's fake client
// stands in for the informers, from a list through Client.
func (r *StatusReconciler) addPods(ctx context.Context, b *inventory.Builder) error {
	if r.Pods != nil {
		for _, o := range r.Pods.List() {
			b.AddIndexedPod(o.(*podindex.Entry))
		}
		return nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range pods.Items {
		b.AddPod(&pods.Items[i])
	}
	return nil
}

// addNodes adds every node from the node informer's store, or from a list through
// Client as addPods does.
func (r *StatusReconciler) addNodes(ctx context.Context, b *inventory.Builder) error {
	if r.Nodes != nil {
		for _, o := range r.Nodes.List() {
			b.AddNode(o.(*corev1.Node))
		}
		return nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range nodes.Items {
		b.AddNode(&nodes.Items[i])
	}
	return nil
}

// updateStatus writes the pool's status when a figure or condition changed, and
// records an Event for each condition that changed.
func (r *StatusReconciler) updateStatus(ctx context.Context, pool *v1alpha1.Pool, sum *inventory.Pool) error {
	want := pool.DeepCopy()
	inventory.SetStatus(want, sum)
	for _, c := range inventory.Conditions(pool, sum) {
		c.ObservedGeneration = pool.Generation
		apimeta.SetStatusCondition(&want.Status.Conditions, c)
	}
	want.Status.ObservedGeneration = pool.Generation
	if equality.Semantic.DeepEqual(want.Status, pool.Status) {
		return nil
	}
	want.Status.ObservedAt = &metav1.Time{Time: r.now()}
	// An update, not a merge patch: a patch would leave out the figures that are 0 on
	// both sides (a new pool's), and kubectl would print them blank. A conflict (the
	// spec changed meanwhile) returns an error and the pass runs again.
	if err := r.Client.Status().Update(ctx, want); err != nil {
		return fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	r.recordConditionEvents(pool, want)
	return nil
}

// Conditions that are bad news when True: their turning True is a Warning Event.
var badWhenTrue = map[string]bool{inventory.ConditionDegraded: true, inventory.ConditionBelowMinNodes: true}

func (r *StatusReconciler) recordConditionEvents(old, updated *v1alpha1.Pool) {
	if r.Recorder == nil {
		return
	}
	for _, c := range updated.Status.Conditions {
		prev := apimeta.FindStatusCondition(old.Status.Conditions, c.Type)
		if prev != nil && prev.Status == c.Status && prev.Reason == c.Reason {
			continue
		}
		if prev == nil && c.Status != metav1.ConditionTrue {
			continue // a new pool that is fine: nothing to say
		}
		kind := corev1.EventTypeNormal
		if badWhenTrue[c.Type] && c.Status == metav1.ConditionTrue {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(updated, nil, kind, c.Type+string(c.Status), "UpdatePoolStatus", "%s=%s: %s", c.Type, c.Status, c.Message)
	}
}

// enqueue is an event handler that adds everyPool, after delay, for the events
// changed lets through (creates and deletes always).
func enqueue[T client.Object](delay time.Duration, changed func(old, new T) bool) handler.TypedEventHandler[T, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if delay == 0 {
			q.Add(everyPool)
			return
		}
		q.AddAfter(everyPool, delay)
	}
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if changed(e.ObjectOld, e.ObjectNew) {
				add(q)
			}
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		GenericFunc: func(_ context.Context, _ event.TypedGenericEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}

// poolSpecChanged ignores the controller's own status writes.
func poolSpecChanged(old, new client.Object) bool {
	return old.GetGeneration() != new.GetGeneration() || !equality.Semantic.DeepEqual(old.GetLabels(), new.GetLabels())
}

// nodeChanged lets through what the inventory reads; heartbeats are not.
func nodeChanged(oldObj, newObj client.Object) bool {
	old, new := oldObj.(*corev1.Node), newObj.(*corev1.Node)
	return policy.IsNodeReady(old) != policy.IsNodeReady(new) ||
		old.Spec.Unschedulable != new.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Labels, new.Labels) ||
		!equality.Semantic.DeepEqual(old.Annotations, new.Annotations) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, new.Status.Allocatable) ||
		// A taint can take a member out of its domain's figures (policy.NodeOut), and
		// capacity makes a domain mixed (status.topology).
		!equality.Semantic.DeepEqual(old.Spec.Taints, new.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Capacity, new.Status.Capacity)
}

// podChanged lets through binding, phase and request changes of the index's entries.
func podChanged(oldObj, newObj client.Object) bool {
	old, new := oldObj.(*podindex.Entry), newObj.(*podindex.Entry)
	return old.NodeName != new.NodeName || old.Phase != new.Phase || !slices.Equal(old.Requests, new.Requests) ||
		inventory.IsWorkloadEntry(old) != inventory.IsWorkloadEntry(new)
}
