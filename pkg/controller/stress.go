package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
)

// StressReconciler runs StressRun objects in the manager: pkg/stress's Reconciler, the
// code the plugin runs itself when no controller takes a run, driven by watches on the
// runs and on their test pods, which are node work (nodejob.Pod): read and watched in
// the node-work cache (NodeWorkCache), which keeps them whole (the manager's pod cache
// drops containers and statuses to stay small).
type StressReconciler struct {
	Kube     kubernetes.Interface
	Recorder *events.Recorder
	// Namespace is litepool's own: the only one test pods are created in.
	Namespace string
	// Accelerators says which resources a test pod holds; the zero value is the known set.
	Accelerators policy.Accelerators
	// Work is the node-work cache.
	Work cache.Cache

	runs   *stress.Reconciler
	client client.Client
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *StressReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.client = mgr.GetClient()
	r.runs = &stress.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pods: r.Work, Kube: r.Kube,
		Recorder: r.Recorder, Namespace: r.Namespace, Accelerators: r.Accelerators}
	return ctrl.NewControllerManagedBy(mgr).
		Named("stress-run").
		For(&v1alpha1.StressRun{}).
		Watches(&v1alpha1.StressRun{}, handler.Funcs{
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				old, new := e.ObjectOld.(*v1alpha1.StressRun), e.ObjectNew.(*v1alpha1.StressRun)
				if freesPool(old, new) {
					r.wakeWaiting(ctx, new, q)
				}
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if run, ok := e.Object.(*v1alpha1.StressRun); ok {
					r.wakeWaiting(ctx, run, q)
				}
			},
		}).
		WatchesRawSource(source.Kind(r.Work, &corev1.Pod{},
			handler.TypedEnqueueRequestForOwner[*corev1.Pod](mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.StressRun{}, handler.OnlyControllerOwner()))).
		Complete(r)
}

// freesPool: the run stopped holding its pool (or its place in the pool's queue).
func freesPool(old, new *v1alpha1.StressRun) bool {
	return (new.Status.Phase.Finished() && !old.Status.Phase.Finished()) || (new.Spec.Abort && !old.Spec.Abort)
}

// wakeWaiting enqueues the runs of run's pool that wait for it (Pending, not aborted),
// read from the manager's cache: they start only when the pool is free.
func (r *StressReconciler) wakeWaiting(ctx context.Context, run *v1alpha1.StressRun, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	var list v1alpha1.StressRunList
	if err := r.client.List(ctx, &list); err != nil {
		return
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name != run.Name && o.Spec.Pool == run.Spec.Pool && !o.Status.Phase.Finished() && o.Status.Phase != v1alpha1.StressRunRunning {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: o.Name}})
		}
	}
}

// Reconcile takes one run a step on.
func (r *StressReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.runs.Reconcile(ctx, req)
}
