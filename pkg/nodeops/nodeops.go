// Package nodeops cordons, uncordons and drains nodes for every litepool operation
// (cordon/drain commands, scale-down, driver upgrades), on top of k8s.io/kubectl/pkg/drain
// so that PDBs, DaemonSets, emptyDir data, unmanaged pods and timeouts behave exactly as
// in `kubectl drain`.
package nodeops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/drain"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Cordon marks a node unschedulable. The first time litepool cordons a node it records
// in runwhere.ai/was-cordoned whether the node was cordoned already, so that Uncordon
// leaves a node someone else cordoned as it found it.
func Cordon(ctx context.Context, client kubernetes.Interface, name string, dryRun cmdutil.DryRunStrategy) (*corev1.Node, error) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	annotations := map[string]*string{}
	if _, ok := node.Annotations[policy.AnnotationWasCordoned]; !ok {
		was := fmt.Sprint(node.Spec.Unschedulable)
		annotations[policy.AnnotationWasCordoned] = &was
	}
	if node.Spec.Unschedulable && len(annotations) == 0 {
		return node, nil
	}
	return patchNode(ctx, client, name, ptr(true), annotations, dryRun)
}

// Uncordon makes a node schedulable again, unless it was cordoned before litepool
// cordoned it; either way it forgets the remembered state. It reports whether the node
// stays cordoned.
func Uncordon(ctx context.Context, client kubernetes.Interface, name string, dryRun cmdutil.DryRunStrategy) (stayedCordoned bool, err error) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	stay := node.Annotations[policy.AnnotationWasCordoned] == "true"
	annotations := map[string]*string{}
	if _, ok := node.Annotations[policy.AnnotationWasCordoned]; ok {
		annotations[policy.AnnotationWasCordoned] = nil
	}
	if !node.Spec.Unschedulable && len(annotations) == 0 {
		return false, nil
	}
	_, err = patchNode(ctx, client, name, ptr(stay), annotations, dryRun)
	return stay, err
}

// ForceUncordon makes a node schedulable whatever its history (the `uncordon` command:
// an operator's explicit word).
func ForceUncordon(ctx context.Context, client kubernetes.Interface, name string, dryRun cmdutil.DryRunStrategy) error {
	_, err := patchNode(ctx, client, name, ptr(false), map[string]*string{policy.AnnotationWasCordoned: nil}, dryRun)
	return err
}

// DrainOptions are `kubectl drain`'s knobs.
type DrainOptions struct {
	Timeout            time.Duration // 0: no limit
	GracePeriodSeconds int           // negative: the pod's own
	IgnoreDaemonSets   bool
	DeleteEmptyDirData bool
	Force              bool
	DisableEviction    bool
	PodSelector        string
	DryRun             cmdutil.DryRunStrategy
	Out, ErrOut        io.Writer
}

// Drain evicts the node's pods (the node should be cordoned first). While it runs the
// node carries runwhere.ai/draining, so listings show it as Draining. An eviction a PDB
// refuses is retried until Timeout; then Drain fails naming the pods that did not leave.
func Drain(ctx context.Context, client kubernetes.Interface, name string, o DrainOptions) error {
	if o.DryRun != cmdutil.DryRunClient {
		if _, err := patchNode(ctx, client, name, nil, map[string]*string{policy.AnnotationDraining: ptr("true")}, o.DryRun); err != nil {
			return err
		}
		defer func() {
			_, _ = patchNode(context.WithoutCancel(ctx), client, name, nil, map[string]*string{policy.AnnotationDraining: nil}, o.DryRun)
		}()
	}
	var failed []string
	helper := &drain.Helper{
		Ctx: ctx, Client: client, Force: o.Force, GracePeriodSeconds: o.GracePeriodSeconds,
		IgnoreAllDaemonSets: o.IgnoreDaemonSets, Timeout: o.Timeout, DeleteEmptyDirData: o.DeleteEmptyDirData,
		PodSelector: o.PodSelector, DisableEviction: o.DisableEviction, DryRunStrategy: o.DryRun,
		EvictErrorRetryDelay: 500 * time.Millisecond,
		Out:                  orDiscard(o.Out), ErrOut: orDiscard(o.ErrOut),
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, eviction bool, err error) {
			if err != nil {
				failed = append(failed, pod.Namespace+"/"+pod.Name)
				return
			}
			if o.Out != nil {
				verb := "evicted"
				if !eviction {
					verb = "deleted"
				}
				fmt.Fprintf(o.Out, "pod/%s %s\n", pod.Name, verb)
			}
		},
	}
	if err := drain.RunNodeDrain(helper, name); err != nil {
		return describeDrainError(name, err, failed)
	}
	return nil
}

func describeDrainError(node string, err error, failed []string) error {
	msg := err.Error()
	if strings.Contains(msg, "global timeout") || strings.Contains(msg, "disruption budget") || apierrors.IsTooManyRequests(err) {
		return fmt.Errorf("drain of node %q stopped: pods %s could not be evicted: a PodDisruptionBudget does not allow it (%v); wait for the budget to allow it, scale the workload, or raise --timeout", node, strings.Join(failed, ", "), err)
	}
	return fmt.Errorf("drain of node %q failed: %w", node, err)
}

// patchNode sets spec.unschedulable (when unschedulable is not nil) and annotations
// (nil values remove) in one merge patch.
func patchNode(ctx context.Context, client kubernetes.Interface, name string, unschedulable *bool, annotations map[string]*string, dryRun cmdutil.DryRunStrategy) (*corev1.Node, error) {
	patch := map[string]any{}
	if len(annotations) > 0 {
		patch["metadata"] = map[string]any{"annotations": annotations}
	}
	if unschedulable != nil {
		patch["spec"] = map[string]any{"unschedulable": *unschedulable}
	}
	if dryRun == cmdutil.DryRunClient {
		return client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{}
	if dryRun == cmdutil.DryRunServer {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, opts)
}

func ptr[T any](v T) *T { return &v }

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
