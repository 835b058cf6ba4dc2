package nodeops

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"

	"github.com/runwhere-ai/litepool/pkg/nodejob"
)

// DefaultNamespace is litepool's own namespace when a command is not told another: its
// node work there is never drained.
const DefaultNamespace = "litepool-system"

// NodeWorkFilter is the one pod filter every litepool drain adds to kubectl's (which
// leaves DaemonSet and mirror pods): litepool's node work in its namespace (a driver
// installer, a remediation, a stress or re-check pod: nodejob.IsNodeWork) and pods
// that have finished stay. Evicting an installer fails its node's upgrade (backoff 0).
func NodeWorkFilter(namespace string) drain.PodFilter {
	return func(pod corev1.Pod) drain.PodDeleteStatus {
		if nodejob.IsNodeWork(&pod, namespace) {
			return drain.MakePodDeleteStatusSkip()
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return drain.MakePodDeleteStatusSkip()
		}
		return drain.MakePodDeleteStatusOkay()
	}
}

// StepOptions are a controller's drain: kubectl drain --ignore-daemonsets
// --delete-emptydir-data, with --force when Force, never litepool's node work.
type StepOptions struct {
	// Namespace is litepool's own (NodeWorkFilter).
	Namespace string
	// Force evicts pods no controller manages too.
	Force bool
}

// StepResult is one pass of a drain.
type StepResult struct {
	// Evicted in this pass.
	Evicted []corev1.Pod
	// Refused: a PodDisruptionBudget said no (429); asked again on a later pass.
	Refused []string
	// Terminating: evicted before, not gone yet.
	Terminating []string
}

// Left is every pod the drain still waits for (namespace/name).
func (r StepResult) Left() []string {
	out := append([]string{}, r.Terminating...)
	for _, p := range r.Evicted {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return append(out, r.Refused...)
}

func stepHelper(ctx context.Context, kube kubernetes.Interface, o StepOptions) *drain.Helper {
	return &drain.Helper{Ctx: ctx, Client: kube, Force: o.Force, GracePeriodSeconds: -1,
		IgnoreAllDaemonSets: true, DeleteEmptyDirData: true, Out: io.Discard, ErrOut: io.Discard,
		AdditionalFilters: []drain.PodFilter{NodeWorkFilter(o.Namespace)}}
}

// DrainPods are the pods a drain of node moves, with those already terminating: what
// is left to drain. An error says why the node cannot be drained (a pod no controller
// manages, without Force).
func DrainPods(ctx context.Context, kube kubernetes.Interface, node string, o StepOptions) ([]corev1.Pod, error) {
	list, errs := stepHelper(ctx, kube, o).GetPodsForDeletion(node)
	if len(errs) > 0 {
		return nil, cannotDrain(node, list, errs)
	}
	return list.Pods(), nil
}

// DrainStep is one pass of the controllers' drain (rollouts, the health loop): it asks
// the Eviction API to move each pod DrainPods names and returns at once, never waiting:
// a pod a PodDisruptionBudget keeps is asked for again on the caller's next pass.
func DrainStep(ctx context.Context, kube kubernetes.Interface, node string, o StepOptions) (StepResult, error) {
	h := stepHelper(ctx, kube, o)
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		return StepResult{}, cannotDrain(node, list, errs)
	}
	var r StepResult
	for _, p := range list.Pods() {
		if p.DeletionTimestamp != nil {
			r.Terminating = append(r.Terminating, p.Namespace+"/"+p.Name)
			continue
		}
		err := h.EvictPod(p, schema.GroupVersion{Group: "policy", Version: "v1"})
		switch {
		case err == nil:
			r.Evicted = append(r.Evicted, p)
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			r.Refused = append(r.Refused, p.Namespace+"/"+p.Name)
		default:
			return r, fmt.Errorf("node %s: evicting %s/%s: %w", node, p.Namespace, p.Name, err)
		}
	}
	return r, nil
}

// CannotDrainError: a pod on the node keeps the drain from starting (one no controller
// manages, without Force), as kubectl drain refuses it; or the pods could not be listed.
type CannotDrainError struct {
	Node string
	Err  error
}

func (e *CannotDrainError) Error() string { return fmt.Sprintf("cannot drain: %v", e.Err) }

func (e *CannotDrainError) Unwrap() error { return e.Err }

// cannotDrain tells a listing that failed (an error to retry) from pods kubectl's
// filters refuse (a CannotDrainError).
func cannotDrain(node string, list *drain.PodDeleteList, errs []error) error {
	if list == nil {
		return utilerrors.NewAggregate(errs)
	}
	return &CannotDrainError{Node: node, Err: utilerrors.NewAggregate(errs)}
}
