package controller

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runwhere-ai/litepool/pkg/nodejob"
)

// NodeWorkCache is the controllers' cache of litepool's node work: the Jobs (driver
// installers, remediations) and their pods, and stress runs' test pods, in litepool's
// namespace, labelled as litepool's, kept whole. Rollouts, the health loop and stress
// runs read their work here and watch it, so its end wakes its owner rather than a
// timer. It is limited to the one
// namespace the controller's Role reaches (list and watch of Jobs and pods there).
func NodeWorkCache(mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{namespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{nodejob.LabelManagedBy: nodejob.ManagedBy}),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	// The informers the readers use start with the cache, before the leader's
	// controllers ask for them.
	for _, obj := range []client.Object{&batchv1.Job{}, &corev1.Pod{}} {
		if _, err := c.GetInformer(context.Background(), obj); err != nil {
			return nil, err
		}
	}
	return c, mgr.Add(c)
}

// jobsOwnedBy is a source of the cache's Jobs, each enqueueing its controller, which
// is of owner's kind.
func jobsOwnedBy(mgr ctrl.Manager, c cache.Cache, owner client.Object) source.Source {
	return source.Kind(c, &batchv1.Job{},
		handler.TypedEnqueueRequestForOwner[*batchv1.Job](mgr.GetScheme(), mgr.GetRESTMapper(), owner, handler.OnlyControllerOwner()))
}
