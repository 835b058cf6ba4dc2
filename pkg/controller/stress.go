package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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

	runs *stress.Reconciler
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *StressReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.runs = &stress.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pods: r.Work, Kube: r.Kube,
		Recorder: r.Recorder, Namespace: r.Namespace, Accelerators: r.Accelerators}
	return ctrl.NewControllerManagedBy(mgr).
		Named("stress-run").
		For(&v1alpha1.StressRun{}).
		WatchesRawSource(source.Kind(r.Work, &corev1.Pod{},
			handler.TypedEnqueueRequestForOwner[*corev1.Pod](mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.StressRun{}, handler.OnlyControllerOwner()))).
		Complete(r)
}

// Reconcile takes one run a step on.
func (r *StressReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.runs.Reconcile(ctx, req)
}
