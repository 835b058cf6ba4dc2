package controller

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// CacheByObject widens the webhook's trimmed node cache (admission.CacheByObject, given
// as base) with what the inventory and the health loop read: a node's conditions,
// allocatable and capacity accelerators and unschedulable flag. Everything else is still
// dropped. accel says which resources are accelerators: the others are dropped too.
// Pods are not in the manager's cache at all: podindex keeps them.
func CacheByObject(base map[client.Object]cache.ByObject, accel policy.Accelerators) map[client.Object]cache.ByObject {
	out := make(map[client.Object]cache.ByObject, len(base))
	for obj, by := range base {
		if _, node := obj.(*corev1.Node); node {
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

// keepNodeInventory keeps what Pool status counts, the node's unschedulable flag and
// allocatable accelerators (with cpu and memory, which a pool's queue may cover:
// policy.PoolCapacity), and what the health loop reads (keepNodeHealth): every
// condition, without heartbeat times, which change every few seconds and matter to
// nobody here.
func keepNodeInventory(accel policy.Accelerators) func(from, to *corev1.Node) {
	return func(from, to *corev1.Node) {
		to.Spec.Unschedulable = from.Spec.Unschedulable
		to.Status.Allocatable = acceleratorsOnly(from.Status.Allocatable, accel)
		for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := from.Status.Allocatable[rn]; ok {
				if to.Status.Allocatable == nil {
					to.Status.Allocatable = corev1.ResourceList{}
				}
				to.Status.Allocatable[rn] = q
			}
		}
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
