package kit

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The commands that hand long work to the in-cluster controller (upgrade driver,
// stress run) ask it whether one runs.

// ControllerLease is the Lease the replicas of Deployment litepool-controller compete for
// (controller.LeaderElectionID); its holder runs the controllers.
const ControllerLease = "litepool-controller"

// ControllerRunning says whether litepool's controller runs: some replica holds its
// leader Lease and renewed it within the lease's duration. The reason comes back for the
// user when it does not (no Lease, not readable, expired).
func ControllerRunning(ctx context.Context, kube kubernetes.Interface, namespace string, now time.Time) (bool, string) {
	lease, err := controllerLease(ctx, kube, namespace)
	if err != nil {
		return false, fmt.Sprintf("no litepool controller found: reading Lease %s/%s: %v", namespace, ControllerLease, err)
	}
	if !LeaseHeld(lease, now) {
		return false, fmt.Sprintf("no litepool controller holds Lease %s/%s", namespace, ControllerLease)
	}
	return true, ""
}

// ControllerGone says whether litepool's controller is known to have stopped: its leader
// Lease is gone, or no holder renewed it within its duration. A Lease the user may not
// read says nothing either way (false), so that a command never takes over from a
// controller that runs. why is for the user.
func ControllerGone(ctx context.Context, kube kubernetes.Interface, namespace string, now time.Time) (gone bool, why string) {
	lease, err := controllerLease(ctx, kube, namespace)
	switch {
	case apierrors.IsNotFound(err):
		return true, fmt.Sprintf("litepool's controller Lease %s/%s is gone", namespace, ControllerLease)
	case err != nil:
		return false, ""
	case !LeaseHeld(lease, now):
		return true, fmt.Sprintf("no litepool controller has renewed Lease %s/%s within its %ds", namespace, ControllerLease, ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))
	}
	return false, ""
}

func controllerLease(ctx context.Context, kube kubernetes.Interface, namespace string) (*coordinationv1.Lease, error) {
	return kube.CoordinationV1().Leases(namespace).Get(ctx, ControllerLease, metav1.GetOptions{})
}

// LeaseHeld: a holder renewed the lease less than its duration ago.
func LeaseHeld(l *coordinationv1.Lease, now time.Time) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}
