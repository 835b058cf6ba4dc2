package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// CacheByObject widens the webhook's trimmed cache (admission.CacheByObject, given as
// base) with what the inventory reads: a pod's accelerator requests, a node's Ready
// condition, allocatable accelerators and unschedulable flag. Everything else is still
// dropped, so a cluster of 40,000 pods costs little more than the webhook alone. accel
// says which resources are accelerators: the others are dropped too.
func CacheByObject(base map[client.Object]cache.ByObject, accel policy.Accelerators) map[client.Object]cache.ByObject {
	out := make(map[client.Object]cache.ByObject, len(base))
	for obj, by := range base {
		switch obj.(type) {
		case *corev1.Pod:
			by.Transform = widen(by.Transform, keepPodAccelerators(accel))
		case *corev1.Node:
			by.Transform = widen(by.Transform, keepNodeInventory(accel))
		}
		out[obj] = by
	}
	return out
}

// widen runs the base transform, then copies back the fields keep picks from the
// original object.
func widen[T any](base func(any) (any, error), keep func(from, to *T)) func(any) (any, error) {
	return func(in any) (any, error) {
		orig, ok := in.(*T)
		if !ok || base == nil {
			return in, nil
		}
		out, err := base(in)
		if err != nil {
			return out, err
		}
		if trimmed, ok := out.(*T); ok && trimmed != orig {
			keep(orig, trimmed)
		}
		return out, nil
	}
}

// keepPodAccelerators keeps what the pod requests of each accelerator resource, summed
// as kubectl and the scheduler sum it (Accelerators.PodAcceleratorRequests: init containers,
// sidecars, overhead; MIG slices apart from GPUs), as the trimmed pod's Spec.Overhead,
// and drops the containers: PodAcceleratorRequests of the trimmed pod equals that
// of the pod, at one small map a pod instead of a copy of every container (40,000 pods:
// 60 MB less).
func keepPodAccelerators(accel policy.Accelerators) func(from, to *corev1.Pod) {
	return func(from, to *corev1.Pod) {
		requests := accel.PodAcceleratorRequests(from)
		to.Spec.Containers, to.Spec.InitContainers, to.Spec.Overhead = nil, nil, nil
		for name, n := range requests {
			if n <= 0 {
				continue
			}
			if to.Spec.Overhead == nil {
				to.Spec.Overhead = corev1.ResourceList{}
			}
			to.Spec.Overhead[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
}

func acceleratorsOnly(l corev1.ResourceList, accel policy.Accelerators) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range l {
		if accel.Is(name) {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// keepNodeInventory keeps the node's unschedulable flag, its Ready condition (without
// heartbeat times, which change every few seconds and matter to nobody here) and its
// allocatable accelerators.
func keepNodeInventory(accel policy.Accelerators) func(from, to *corev1.Node) {
	return func(from, to *corev1.Node) {
		to.Spec.Unschedulable = from.Spec.Unschedulable
		for _, c := range from.Status.Conditions {
			if c.Type == corev1.NodeReady {
				to.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
			}
		}
		to.Status.Allocatable = acceleratorsOnly(from.Status.Allocatable, accel)
		keepNodeHealth(from, to, accel)
	}
}

// keepNodeHealth keeps what the health loop reads (pkg/health): every condition with
// its transition time (NotReady's grace period, Node Problem Detector's and
// NVSentinel's conditions), still without heartbeats, and the accelerator capacity
// that allocatable is compared with.
func keepNodeHealth(from, to *corev1.Node, accel policy.Accelerators) {
	to.Status.Conditions = nil
	for _, c := range from.Status.Conditions {
		to.Status.Conditions = append(to.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status,
			Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime})
	}
	to.Status.Capacity = acceleratorsOnly(from.Status.Capacity, accel)
}
