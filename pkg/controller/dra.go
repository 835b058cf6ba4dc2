package controller

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/inventory"
)

// servesDRA says whether the cluster serves resource.k8s.io/v1 ResourceSlices: only then
// does the status controller watch DRA objects (an informer on a resource the server
// does not have would never sync, and the controller would never start).
func servesDRA(mgr ctrl.Manager) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(resourcev1.SchemeGroupVersion.WithKind("ResourceSlice").GroupKind(), "v1")
	return err == nil
}

// watchDRA adds the DRA objects to the status controller's watches: a slice's devices,
// a claim's allocation and a class's selectors move DRA figures between pools.
func watchDRA(b *builder.Builder) *builder.Builder {
	return b.
		Watches(&resourcev1.DeviceClass{}, enqueue(BatchDelay, specChanged)).
		Watches(&resourcev1.ResourceSlice{}, enqueue(BatchDelay, specChanged)).
		Watches(&resourcev1.ResourceClaim{}, enqueue(BatchDelay, allocationChanged))
}

func specChanged(old, new client.Object) bool { return old.GetGeneration() != new.GetGeneration() }

func allocationChanged(oldObj, newObj client.Object) bool {
	old, new := oldObj.(*resourcev1.ResourceClaim), newObj.(*resourcev1.ResourceClaim)
	return !equality.Semantic.DeepEqual(old.Status.Allocation, new.Status.Allocation)
}

// draNodes counts DRA devices from the cache, as `get pools` does from the API server.
func (r *StatusReconciler) draNodes(ctx context.Context) (inventory.DRANodes, error) {
	if !r.DRA {
		return nil, nil
	}
	c, err := classCounter(ctx, r.Client)
	if err != nil {
		return nil, err
	}
	var claims resourcev1.ResourceClaimList
	if err := r.Client.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range claims.Items {
		c.AddClaim(&claims.Items[i])
	}
	var slices resourcev1.ResourceSliceList
	if err := r.Client.List(ctx, &slices, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range slices.Items {
		c.AddSlice(&slices.Items[i])
	}
	return c.Finish(), nil
}

// classCounter is a DRA counter that knows every DeviceClass in the cache: what the
// status and the queue reconcilers both start from.
func classCounter(ctx context.Context, r client.Reader) (*inventory.DRACounter, error) {
	c := inventory.NewDRACounter()
	var classes resourcev1.DeviceClassList
	if err := r.List(ctx, &classes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range classes.Items {
		c.AddClass(&classes.Items[i])
	}
	return c, nil
}
