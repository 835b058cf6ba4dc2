package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
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
// runs and on their test pods. The pods are watched through a cache of their own,
// limited to litepool's namespace and the stress-test label and kept whole (the
// manager's pod cache drops containers and statuses to stay small).
type StressReconciler struct {
	Kube     kubernetes.Interface
	Recorder *events.Recorder
	// Namespace is litepool's own: the only one test pods are created in.
	Namespace string
	// Accelerators says which resources a test pod holds; the zero value is the known set.
	Accelerators policy.Accelerators

	runs *stress.Reconciler
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *StressReconciler) SetupWithManager(mgr ctrl.Manager) error {
	pods, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{r.Namespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{stress.LabelComponent: stress.Component}),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(pods); err != nil {
		return err
	}
	r.runs = &stress.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pods: pods, Kube: r.Kube,
		Recorder: r.Recorder, Namespace: r.Namespace, Accelerators: r.Accelerators}
	return ctrl.NewControllerManagedBy(mgr).
		Named("stress-run").
		For(&v1alpha1.StressRun{}).
		WatchesRawSource(source.Kind(pods, &corev1.Pod{},
			handler.TypedEnqueueRequestForOwner[*corev1.Pod](mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.StressRun{}, handler.OnlyControllerOwner()))).
		Complete(r)
}

// Reconcile takes one run a step on.
func (r *StressReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.runs.Reconcile(ctx, req)
}
