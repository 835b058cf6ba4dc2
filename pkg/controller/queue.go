package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/queue"
)

// ConditionQueue is the Pool condition of its scheduler queue (spec.queue): True when
// the queue is written; False says why not (the scheduler is not installed, or an
// object of the queue's name is someone else's).
const ConditionQueue = "Queue"

// Reasons of the Queue condition.
const (
	ReasonQueueSynced       = "Synced"
	ReasonQueueNotInstalled = "SchedulerNotInstalled"
	ReasonQueueNotOwned     = "NotOwned"
	ReasonQueueForbidden    = "Forbidden"
	// ReasonQueueClamped: written, with Volcano's deserved or guarantee lowered to a
	// capacity that dropped below spec.queue's.
	ReasonQueueClamped = "Clamped"
)

// QueueResync is how often a pool's queue is read back and written again without any
// event: Kueue's admitted and pending counts reach Pool status this way, and an owned
// object someone edited or deleted is put back.
var QueueResync = 15 * time.Second

// notInstalledRetry is how soon a pool whose scheduler is missing looks again.
const notInstalledRetry = time.Minute

var (
	queueQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_queue_quota",
		Help: "The quota litepool wrote into a pool's scheduler queue (spec.queue), by pool, scheduler and resource: the accelerator's, and the DRA devices' under their logical resource (spec.queue.devices); each the schedulable capacity less headroom.",
	}, []string{"pool", "scheduler", "resource"})
	queueWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "litepool_pool_queue_workloads",
		Help: "Workloads in a pool's scheduler queue as the scheduler reports them, by pool, scheduler and state (admitted, pending).",
	}, []string{"pool", "scheduler", "state"})
)

// QueueReconciler keeps each opted-in pool's scheduler queue: the capacity
// (policy.PoolCapacity) from the members in the node cache, written by the pool's
// adapter, and what the scheduler reports, in status.queue.
type QueueReconciler struct {
	Client client.Client
	// Recorder, when set, records an Event on the Pool each time its quota moves.
	Recorder     events.EventRecorder
	Accelerators policy.Accelerators
	Adapters     map[v1alpha1.QueueScheduler]queue.Adapter
	// DRA: the cluster serves resource.k8s.io/v1; a pool's spec.queue.devices is
	// counted from its ResourceSlices and DeviceClasses (else it counts 0).
	DRA bool
	now func() time.Time
}

// SetupWithManager registers the controller: a pool is reconciled when its spec
// changes, when a node joins, leaves or changes what capacity reads, and when a
// namespace comes or goes or changes labels (what the pool admits).
func (r *QueueReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.now == nil {
		r.now = time.Now
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.DRA {
		// A driver's slice moves its node's pool's device quota; a class's selectors
		// move any pool's.
		b = b.Watches(&resourcev1.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(r.poolOfSlice),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Watches(&resourcev1.DeviceClass{}, handler.EnqueueRequestsFromMapFunc(r.queuedPools),
				builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.
		Named("pool-queue").
		Watches(&v1alpha1.Pool{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return queueInputsChanged(e.ObjectOld.(*v1alpha1.Pool), e.ObjectNew.(*v1alpha1.Pool))
		}})).
		Watches(&corev1.Node{}, nodePools()).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.queuedPools)).
		Complete(r)
}

// queueInputsChanged lets through a Pool update the queue depends on: its spec, and its
// status.queue or Queue condition when someone else wrote them (they are put back). The
// status controller's writes of the other figures are not.
func queueInputsChanged(old, new *v1alpha1.Pool) bool {
	return old.Generation != new.Generation || !equality.Semantic.DeepEqual(old.Status.Queue, new.Status.Queue) ||
		!equality.Semantic.DeepEqual(apimeta.FindStatusCondition(old.Status.Conditions, ConditionQueue),
			apimeta.FindStatusCondition(new.Status.Conditions, ConditionQueue))
}

// nodePools enqueues the pool a node is in, and the one it left.
func nodePools() handler.TypedEventHandler[client.Object, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], nodes ...client.Object) {
		for _, n := range nodes {
			if p := n.GetLabels()[policy.LabelPool]; p != "" {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: p}})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// Labels too: a topology label moves a member between domains, and the
			// domains' HyperNodes (Volcano) follow it.
			if old, new := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node); capacityChanged(old, new) || !maps.Equal(old.Labels, new.Labels) {
				add(q, e.ObjectOld, e.ObjectNew)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

// capacityChanged lets through what policy.PoolCapacity reads; heartbeats are not.
func capacityChanged(old, new *corev1.Node) bool {
	return policy.IsNodeReady(old) != policy.IsNodeReady(new) || old.Spec.Unschedulable != new.Spec.Unschedulable ||
		old.Labels[policy.LabelPool] != new.Labels[policy.LabelPool] ||
		old.Annotations[policy.AnnotationUpgradeState] != new.Annotations[policy.AnnotationUpgradeState] ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, new.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, new.Status.Allocatable)
}

// poolOfSlice is the pool of the node a slice's devices are on, by the node's label
// (the slice's own labels are the driver's claims and are not read).
func (r *QueueReconciler) poolOfSlice(ctx context.Context, o client.Object) []reconcile.Request {
	slice := o.(*resourcev1.ResourceSlice)
	nodes := map[string]bool{}
	if slice.Spec.NodeName != nil {
		nodes[*slice.Spec.NodeName] = true
	}
	for _, d := range slice.Spec.Devices {
		if d.NodeName != nil {
			nodes[*d.NodeName] = true
		}
	}
	var out []reconcile.Request
	for name := range nodes {
		var node corev1.Node
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err == nil {
			out = append(out, poolOfNode(ctx, &node)...)
		}
	}
	return out
}

// deviceCounts is, per node, the healthy DRA devices the classes of the pool's
// spec.queue.devices select, from the cache's DeviceClasses and ResourceSlices.
//
// Only the members' slices are evaluated (CEL is most of the cost), and slices that
// publish devices of several nodes, whose devices name their own.
func (r *QueueReconciler) deviceCounts(ctx context.Context, pool *v1alpha1.Pool, members []*corev1.Node) (map[string]int64, error) {
	if !r.DRA || pool.Spec.Queue.Devices == nil {
		return nil, nil
	}
	c, err := classCounter(ctx, r.Client)
	if err != nil {
		return nil, err
	}
	var slices resourcev1.ResourceSliceList
	if err := r.Client.List(ctx, &slices, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	member := make(map[string]bool, len(members))
	for _, n := range members {
		member[n.Name] = true
	}
	// A resource pool's newest generation over all its slices, so that skipping a
	// non-member's newer slice does not leave a member's stale one counted.
	type poolKey struct{ driver, pool string }
	newest := map[poolKey]int64{}
	for i := range slices.Items {
		sp := &slices.Items[i].Spec
		k := poolKey{sp.Driver, sp.Pool.Name}
		newest[k] = max(newest[k], sp.Pool.Generation)
	}
	for i := range slices.Items {
		sp := &slices.Items[i].Spec
		if sp.Pool.Generation < newest[poolKey{sp.Driver, sp.Pool.Name}] {
			continue
		}
		if sp.NodeName == nil || member[*sp.NodeName] {
			c.AddSlice(&slices.Items[i])
		}
	}
	return c.Finish().Matching(pool.Spec.Queue.Devices.DeviceClassNames), nil
}

// queuedPools are the pools with a queue: a namespace change may change what any of
// them admits.
func (r *QueueReconciler) queuedPools(ctx context.Context, _ client.Object) []reconcile.Request {
	var pools v1alpha1.PoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, p := range pools.Items {
		if p.Spec.Queue != nil || p.Status.Queue != nil {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
	}
	return out
}

// Reconcile writes one pool's queue and its status.queue, or removes the queue the pool
// owns when spec.queue is gone.
func (r *QueueReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pool v1alpha1.Pool
	if err := r.Client.Get(ctx, req.NamespacedName, &pool); err != nil {
		forgetQueueGauges(req.Name)
		return reconcile.Result{}, client.IgnoreNotFound(err) // its objects leave with it (ownerReferences)
	}
	if pool.Spec.Queue == nil {
		return reconcile.Result{}, r.turnOff(ctx, &pool)
	}
	sched := pool.Spec.Queue.Scheduler
	if sched == "" {
		sched = v1alpha1.QueueKueue
	}
	adapter, ok := r.Adapters[sched]
	if !ok {
		return reconcile.Result{}, fmt.Errorf("pool %s: no adapter for scheduler %q", pool.Name, sched)
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{policy.LabelPool: pool.Name}); err != nil {
		return reconcile.Result{}, err
	}
	members := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		members[i] = &nodes.Items[i]
	}
	devices, err := r.deviceCounts(ctx, &pool, members)
	if err != nil {
		return reconcile.Result{}, err
	}
	capacity := policy.WithDevices(&pool, policy.PoolCapacity(&pool, members, r.Accelerators), devices)
	var nss corev1.NamespaceList
	if err := r.Client.List(ctx, &nss); err != nil {
		return reconcile.Result{}, err
	}
	namespaces, all := queue.AdmittedNamespaces(&pool, nss.Items)
	// The adapter sees only the shares it can write; the Pool keeps what was asked.
	target := &pool
	shares, skipped := queue.AdmittedShares(&pool, namespaces, all, nss.Items)
	if len(skipped) > 0 {
		target = pool.DeepCopy()
		target.Spec.Queue.Shares = shares
	}

	st, err := adapter.Sync(ctx, target, capacity, namespaces, all)
	cond := metav1.Condition{Type: ConditionQueue, Status: metav1.ConditionTrue, Reason: ReasonQueueSynced,
		Message: queueMessage(target, sched, capacity, len(members), skipped)}
	after := QueueResync
	switch {
	case queue.IsNotInstalled(err):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonQueueNotInstalled, err.Error()
		st, after = nil, notInstalledRetry
	case queue.IsNotOwned(err):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonQueueNotOwned, err.Error()
	case queue.IsClamped(err):
		cond.Reason, cond.Message = ReasonQueueClamped, cond.Message+"; "+err.Error()
		r.recordClamp(&pool, err)
	case apierrors.IsForbidden(err):
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonQueueForbidden
		cond.Message = fmt.Sprintf("the controller may not write %s's objects (%v): add the component deploy/webhook/components/%s",
			sched, err, strings.ToLower(string(sched)))
		st, after = nil, notInstalledRetry
	case err != nil:
		return reconcile.Result{}, err
	}
	if st != nil && st.HyperNodesSkipped != "" {
		cond.Message += "; " + st.HyperNodesSkipped
	}
	if err := r.writeStatus(ctx, &pool, st, &cond); err != nil {
		return reconcile.Result{}, err
	}
	r.recordQuotaMove(&pool, st, capacity)
	recordQueue(pool.Name, sched, st)
	return reconcile.Result{RequeueAfter: after}, nil
}

// recordQuotaMove records an Event on the Pool when the quota written differs from the
// one its status held, naming the members held out: the trail from a node's fault to
// the queue.
func (r *QueueReconciler) recordQuotaMove(pool *v1alpha1.Pool, st *v1alpha1.QueueStatus, c policy.Capacity) {
	old := pool.Status.Queue
	if r.Recorder == nil || st == nil || old == nil || (old.Quota == st.Quota && old.DeviceQuota == st.DeviceQuota) {
		return
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(c.Out)) {
		out = append(out, n+" "+c.Out[n])
	}
	held := "none held out"
	if len(out) > 0 {
		held = "held out: " + strings.Join(out, ", ")
	}
	moved := fmt.Sprintf("%d -> %d %s", old.Quota, st.Quota, st.Resource)
	if st.DeviceResource != "" {
		moved += fmt.Sprintf(", %d -> %d %s", old.DeviceQuota, st.DeviceQuota, st.DeviceResource)
	}
	r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, "QueueQuotaChanged", "UpdateQueue", "%s queue %s: quota %s (%d schedulable members; %s)",
		st.Scheduler, st.ClusterQueue, moved, st.SchedulableNodes, held)
}

// recordClamp records an Event when the queue is first written clamped (the condition
// was not Clamped before).
func (r *QueueReconciler) recordClamp(pool *v1alpha1.Pool, err error) {
	old := apimeta.FindStatusCondition(pool.Status.Conditions, ConditionQueue)
	if r.Recorder == nil || (old != nil && old.Reason == ReasonQueueClamped) {
		return
	}
	r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, "QueueClamped", "UpdateQueue", "%v", err)
}

func queueMessage(pool *v1alpha1.Pool, sched v1alpha1.QueueScheduler, c policy.Capacity, members int, skipped []string) string {
	quota := fmt.Sprintf("%d %s", c.Accelerators, c.Resource)
	switch {
	case c.DeviceResource != "" && c.Resource == "":
		quota = fmt.Sprintf("%d %s (DRA devices)", c.Devices, c.DeviceResource)
	case c.DeviceResource != "":
		quota += fmt.Sprintf(", %d %s (DRA devices)", c.Devices, c.DeviceResource)
	}
	msg := fmt.Sprintf("%s queue %s: quota %s from %d of %d members", sched, pool.Name, quota, len(c.Nodes), members)
	if h := pool.Spec.Queue.Headroom; h > 0 {
		msg += fmt.Sprintf(", less headroom %d", h)
	}
	if out := len(c.Out); out > 0 {
		msg += fmt.Sprintf(" (%d held out: not Ready, cordoned, quarantined, upgrading or tainted beyond what its pods tolerate)", out)
	}
	if shares, _ := queue.Split(pool, c); len(shares) > 0 {
		var parts []string
		for _, s := range shares {
			parts = append(parts, fmt.Sprintf("%s %d", s.Namespace, s.Accelerators))
		}
		msg += fmt.Sprintf("; shares (ClusterQueues in cohort %s): %s", queue.Cohort(pool), strings.Join(parts, ", "))
		if asked, got := sumShares(pool), sumSplit(shares); got < asked {
			msg += fmt.Sprintf(" (asked %d, capacity %d: each share shrunk in proportion)", asked, c.Accelerators)
		}
	}
	if len(skipped) > 0 {
		msg += fmt.Sprintf("; no share for %s: the namespace does not exist or the pool does not admit it", strings.Join(skipped, ", "))
	}
	return msg
}

// turnOff deletes the queue objects the pool owns and clears status.queue and the
// Queue condition.
func (r *QueueReconciler) turnOff(ctx context.Context, pool *v1alpha1.Pool) error {
	if pool.Status.Queue == nil && apimeta.FindStatusCondition(pool.Status.Conditions, ConditionQueue) == nil {
		return nil
	}
	var errs []error
	for _, a := range r.Adapters {
		errs = append(errs, a.Remove(ctx, pool))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	forgetQueueGauges(pool.Name)
	return r.writeStatus(ctx, pool, nil, nil)
}

// writeStatus sets status.queue and the Queue condition (nil: removed) on the latest
// Pool, when they changed.
func (r *QueueReconciler) writeStatus(ctx context.Context, pool *v1alpha1.Pool, st *v1alpha1.QueueStatus, cond *metav1.Condition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var latest v1alpha1.Pool
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(pool), &latest); err != nil {
			return client.IgnoreNotFound(err)
		}
		want := latest.DeepCopy()
		want.Status.Queue = st
		if cond == nil {
			apimeta.RemoveStatusCondition(&want.Status.Conditions, ConditionQueue)
		} else {
			c := *cond
			c.ObservedGeneration = latest.Generation
			apimeta.SetStatusCondition(&want.Status.Conditions, c)
		}
		if equality.Semantic.DeepEqual(want.Status, latest.Status) {
			return nil
		}
		return r.Client.Status().Update(ctx, want)
	})
}

func recordQueue(pool string, sched v1alpha1.QueueScheduler, st *v1alpha1.QueueStatus) {
	forgetQueueGauges(pool)
	if st == nil {
		return
	}
	queueQuota.WithLabelValues(pool, string(sched), string(st.Resource)).Set(float64(st.Quota))
	if st.DeviceResource != "" && st.DeviceResource != st.Resource {
		queueQuota.WithLabelValues(pool, string(sched), string(st.DeviceResource)).Set(float64(st.DeviceQuota))
	}
	queueWorkloads.WithLabelValues(pool, string(sched), "admitted").Set(float64(st.Admitted))
	queueWorkloads.WithLabelValues(pool, string(sched), "pending").Set(float64(st.Pending))
}

func forgetQueueGauges(pool string) {
	for _, g := range []*prometheus.GaugeVec{queueQuota, queueWorkloads} {
		g.DeletePartialMatch(prometheus.Labels{"pool": pool})
	}
}

func sumShares(pool *v1alpha1.Pool) (n int64) {
	for _, s := range pool.Spec.Queue.Shares {
		n += s.Accelerators
	}
	return n
}

func sumSplit(shares []queue.Share) (n int64) {
	for _, s := range shares {
		n += s.Accelerators
	}
	return n
}
