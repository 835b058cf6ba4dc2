package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
)

// Name is the controller's name in Events (reportingController) and logs.
const Name = "litepool-controller"

// LeaderElectionID names the Lease the replicas of litepool-webhook compete for: the
// webhook serves on every replica, the controllers run on the holder only.
const LeaderElectionID = "litepool-controller"

// Setup registers litepool's controllers with the manager. They start when the manager
// has won the leader election (or at once without one).
func Setup(mgr ctrl.Manager) error {
	status := &StatusReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name)}
	return status.SetupWithManager(mgr)
}
