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

// The commands that hand long work to the in-cluster controller (HandOver) ask
// whether it stopped.

// ControllerLease is the Lease the replicas of Deployment litepool-controller compete for
// (controller.LeaderElectionID); its holder runs the controllers.
const ControllerLease = "litepool-controller"

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
