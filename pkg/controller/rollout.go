package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// RolloutReconciler drives the driver rollouts the plugin handed to the cluster
// (`kubectl litepool upgrade driver --in-cluster`): the rollout is recorded in its
// nodes' annotations (runwhere.ai/upgrade-run with inCluster, and each node's state),
// and the leader runs pkg/upgrade's Rollout on it, the same code the plugin runs.
// Every step is recorded on the node before the next, so a new leader continues where
// the old one stopped and never redoes a finished node.
type RolloutReconciler struct {
	Client   client.Client        // the cache
	Kube     kubernetes.Interface // what pkg/upgrade talks to
	Recorder *events.Recorder
	// Recheck is how often an active rollout is looked at again (restarting it if its
	// Rollout returned early, e.g. waiting for a NotReady node).
	Recheck time.Duration

	mu      sync.Mutex
	running map[string]bool // rollout ids with a Rollout running in this process
}

// SetupWithManager registers the controller; it runs on the leader only.
func (r *RolloutReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recheck == 0 {
		r.Recheck = 15 * time.Second
	}
	r.running = map[string]bool{}
	return ctrl.NewControllerManagedBy(mgr).
		Named("driver-rollout").
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(activeRollout),
			builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		Complete(r)
}

// activeRollout maps a node to its in-cluster rollout while the node still has work
// (neither done nor failed).
func activeRollout(_ context.Context, obj client.Object) []reconcile.Request {
	run, state, ok := inClusterRun(obj)
	if !ok || state == policy.UpgradeDone || state == policy.UpgradeFailed {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: run.ID}}}
}

func inClusterRun(obj client.Object) (policy.UpgradeRun, policy.UpgradeState, bool) {
	ann := obj.GetAnnotations()
	raw, ok := ann[policy.AnnotationUpgradeRun]
	if !ok {
		return policy.UpgradeRun{}, "", false
	}
	run, err := policy.DecodeUpgradeRun(raw)
	if err != nil || !run.InCluster {
		return policy.UpgradeRun{}, "", false
	}
	return run, policy.UpgradeState(ann[policy.AnnotationUpgradeState]), true
}

// Reconcile starts the rollout's Rollout unless it runs already, has nothing left to
// do, or stopped on a failed node (then `upgrade resume --retry-failed` re-marks it).
func (r *RolloutReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("rollout", req.Name)
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, err
	}
	var run policy.UpgradeRun
	var names []string
	active, failed := 0, 0
	for i := range nodes.Items {
		nr, state, ok := inClusterRun(&nodes.Items[i])
		if !ok || nr.ID != req.Name {
			continue
		}
		run = nr
		names = append(names, nodes.Items[i].Name)
		switch state {
		case policy.UpgradeDone:
		case policy.UpgradeFailed:
			failed++
		default:
			active++
		}
	}
	if active == 0 {
		return reconcile.Result{}, nil
	}
	if failed > 0 {
		log.Info("rollout stopped on a failed node; `kubectl litepool upgrade resume --retry-failed` continues it", "failed", failed)
		return reconcile.Result{}, nil
	}
	if !r.start(run.ID) {
		return reconcile.Result{RequeueAfter: r.Recheck}, nil
	}
	scope := names
	if run.Pool != "" {
		scope = nil // a pool rollout reads the whole pool (every node counts for max-unavailable)
	}
	go r.drive(ctx, log, run, scope)
	return reconcile.Result{RequeueAfter: r.Recheck}, nil
}

func (r *RolloutReconciler) start(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[id] {
		return false
	}
	r.running[id] = true
	return true
}

// drive runs the rollout until it ends, fails, or the leader stops (ctx is the
// controller's: cancelled when the manager stops or loses the lease).
func (r *RolloutReconciler) drive(ctx context.Context, log logr.Logger, run policy.UpgradeRun, nodes []string) {
	defer func() {
		r.mu.Lock()
		delete(r.running, run.ID)
		r.mu.Unlock()
	}()
	u := &upgrade.Upgrader{Kube: r.Kube, Recorder: r.Recorder, Progress: logWriter{log}}
	log.Info("driving rollout", "pool", run.Pool, "target", run.Target, "maxUnavailable", run.MaxUnavailable)
	err := u.Rollout(ctx, run, nodes)
	switch {
	case err == nil:
		log.Info("rollout pass finished")
	case errors.Is(err, context.Canceled):
		log.Info("rollout interrupted: the next leader continues it")
	default:
		log.Error(err, "rollout stopped")
	}
}

// logWriter turns the Upgrader's progress lines into log lines.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.log.Info(line)
	}
	return len(p), nil
}
