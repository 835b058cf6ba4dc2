// Package pass is the one shape of litepool's reconcilers that act on nodes (driver
// rollouts, the health loop, stress runs): load the object, decide, store the status
// that records the decision, then tell the world (node labels and annotations, Events,
// what is made from a stored name), and record in the status that it was told when
// the decision needs it.
//
// The order is the point. Another writer of the same object (a second leader, the
// plugin's stand-in, the Pool status controller) makes the status write a conflict;
// a pass that loses it has told nobody anything, and the retry decides again from the
// winner's write. A pass that ends after its write (a crash, an error from a node
// patch) left a status that says what is still owed, and the next pass pays it.
//
// A conflict, like every other error, is returned: the controller retries the object
// through its rate limiter, and the plugin's loop reads the object again.
package pass

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Effect is something a pass does once its status is stored. It runs again on the
// next pass when the status still owes it (Decision.Owed), so it finds what an earlier
// run of it did rather than doing it twice.
type Effect func(ctx context.Context) error

// Decision is what Decide made of the object, besides the status it set in it.
type Decision struct {
	// Requeue is how soon to look again when nothing changes (0: when something does).
	Requeue time.Duration
	// Effects run in order once the status is stored; the first error stops them and is
	// returned.
	Effects []Effect
	// Paid, when set, marks in the object's status that Effects ran; that status is
	// stored too. A decision whose effects are found from the status alone (a taint
	// its entry calls for) needs none.
	Paid func()
	// Err is an error of a step Decide took: the status is stored (it records the
	// steps that went), the effects it owes run, and Err is returned.
	Err error
}

// Pass reconciles objects of type T.
type Pass[T client.Object] struct {
	// Client reads T (the controller's cache) and writes its status (an update: a
	// status written meanwhile is a conflict, never overwritten).
	Client client.Client
	// New is an empty T to read into.
	New func() T
	// Decide sets the object's status to what this pass decided and says what follows.
	// It may take steps whose results are named deterministically (a Job, a cordon),
	// which a retry finds; what others read as news (an Event, a node's label) is an
	// Effect. An error leaves the status unstored.
	Decide func(ctx context.Context, obj T) (Decision, error)
}

// Reconcile is one pass over the object req names: load, decide, store, apply, store
// what was paid.
func (p *Pass[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := p.New()
	if err := p.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopyObject()
	d, err := p.Decide(ctx, obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	if gone, err := p.store(ctx, before, obj); gone || err != nil {
		return reconcile.Result{}, err
	}
	for _, e := range d.Effects {
		if err := e(ctx); err != nil {
			return reconcile.Result{}, errors.Join(err, d.Err)
		}
	}
	if d.Paid != nil && len(d.Effects) > 0 {
		before = obj.DeepCopyObject()
		d.Paid()
		if gone, err := p.store(ctx, before, obj); gone || err != nil {
			return reconcile.Result{}, errors.Join(err, d.Err)
		}
	}
	if d.Err != nil {
		return reconcile.Result{}, d.Err
	}
	return reconcile.Result{RequeueAfter: d.Requeue}, nil
}

// store writes obj's status unless it equals before's; gone: the object was deleted.
func (p *Pass[T]) store(ctx context.Context, before any, obj T) (gone bool, err error) {
	if equality.Semantic.DeepEqual(before, obj) {
		return false, nil
	}
	err = p.Client.Status().Update(ctx, obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
