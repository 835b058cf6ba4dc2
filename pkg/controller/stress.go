package controller

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
)

// StressReconciler executes the stress runs the plugin recorded on Pool objects
// (stress.AnnotationRun): it claims a Pending run (Pending → Running, an update that
// fails if anyone changed the Pool meanwhile), runs pkg/stress's Runner on it, the code
// the plugin runs otherwise, and records the result (Done). A Running run this process
// did not start belongs to a leader that is gone: it is marked Interrupted, never run
// a second time.
type StressReconciler struct {
	Client   client.Client // reads Pools from the cache, writes their annotation
	Kube     kubernetes.Interface
	Recorder *events.Recorder
	// Identity names this replica in the run's holder field.
	Identity string
	// Accelerators says which resources a test pod holds; the zero value is the known set.
	Accelerators policy.Accelerators

	mu      sync.Mutex
	running map[string]bool // pools with a run going in this process
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *StressReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.running = map[string]bool{}
	return ctrl.NewControllerManagedBy(mgr).
		Named("stress-run").
		For(&v1alpha1.Pool{}, builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		Complete(r)
}

// Reconcile acts on the pool's recorded run by its state.
func (r *StressReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pool v1alpha1.Pool
	if err := r.Client.Get(ctx, req.NamespacedName, &pool); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	raw, ok := pool.Annotations[stress.AnnotationRun]
	if !ok {
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("pool", pool.Name)
	run, err := stress.DecodeRun(raw)
	if err != nil {
		log.Error(err, "ignoring an unreadable stress run")
		return reconcile.Result{}, nil
	}
	log = log.WithValues("stressRun", run.ID)
	switch {
	case run.Finished(), r.isRunning(pool.Name):
		return reconcile.Result{}, nil
	case run.State == stress.RunRunning:
		run.State, run.Message = stress.RunInterrupted, "the controller running it stopped (leader change); start a new run"
		log.Info("stress run was cut short by a leader change: marked Interrupted, not run again")
		return reconcile.Result{}, r.write(ctx, pool.Name, run)
	}
	opts, err := run.Options(pool.Name)
	if err != nil {
		run.State, run.Message = stress.RunDone, err.Error()
		return reconcile.Result{}, r.write(ctx, pool.Name, run)
	}
	opts.Accelerators = r.Accelerators
	run.State, run.Holder = stress.RunRunning, r.Identity
	claimed := pool.DeepCopy()
	claimed.Annotations[stress.AnnotationRun] = run.Encode()
	if err := r.Client.Update(ctx, claimed); err != nil { // optimistic: a conflict requeues
		return reconcile.Result{}, err
	}
	r.setRunning(pool.Name, true)
	go r.execute(ctx, log, pool.Name, run, opts)
	return reconcile.Result{}, nil
}

// execute runs the Runner and records the outcome; ctx is the controller's, cancelled
// when the leader stops (then the run stays Running and the next leader interrupts it).
func (r *StressReconciler) execute(ctx context.Context, log logr.Logger, pool string, run stress.Run, opts stress.Options) {
	defer r.setRunning(pool, false)
	opts.Progress = logWriter{log}
	log.Info("running stress tests", "tests", run.Tests, "image", run.Image)
	runner := &stress.Runner{Kube: r.Kube, Recorder: r.Recorder}
	results, err := runner.Run(ctx, opts)
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		log.Info("stress run interrupted: the leader stopped")
		return
	}
	run.State = stress.RunDone
	run.Summarize(results)
	if err != nil {
		run.Message = err.Error()
	}
	log.Info("stress run finished", "passed", run.Passed, "failed", len(run.FailedNodes), "skipped", run.Skipped, "error", run.Message)
	if err := r.write(ctx, pool, run); err != nil {
		log.Error(err, "recording the stress run's result")
	}
}

// write stores run on the pool (a merge patch of the annotation alone: only the
// holder of a run moves it on), unless the pool carries another run by now.
func (r *StressReconciler) write(ctx context.Context, pool string, run stress.Run) error {
	var p v1alpha1.Pool
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pool}, &p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cur, err := stress.DecodeRun(p.Annotations[stress.AnnotationRun]); err != nil || cur.ID != run.ID {
		return nil
	}
	patched := p.DeepCopy()
	patched.Annotations[stress.AnnotationRun] = run.Encode()
	return client.IgnoreNotFound(r.Client.Patch(ctx, patched, client.MergeFrom(&p)))
}

func (r *StressReconciler) isRunning(pool string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[pool]
}

func (r *StressReconciler) setRunning(pool string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.running[pool] = true
	} else {
		delete(r.running, pool)
	}
}
