package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/queue"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// Name is the controller's name in Events (reportingController) and logs.
const Name = "litepool-controller"

// LeaderElectionID names the Lease that the replicas running the controllers (Deployment
// litepool-controller: litepool-webhook --controllers --leader-elect) compete for: the
// controllers run on the holder only.
const LeaderElectionID = "litepool-controller"

// SetupIn registers litepool's controllers with the manager: Pool status and metrics,
// in-cluster driver rollouts, exclusive taints, node health, stress runs and the pools'
// scheduler queues. They start
// when the manager has won the leader election (or at once without one). accel says
// which resources are accelerators; the node cache must have been trimmed with the same
// set (CacheByObject), and pods is the pod index built with it (podindex.New), which the
// caller starts. namespace is litepool's own (the webhook's --namespace): the one
// namespace the controllers create Jobs and pods in.
func SetupIn(mgr ctrl.Manager, accel policy.Accelerators, namespace string, pods *podindex.Index) error {
	status := &StatusReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name), Accelerators: accel, PodIndex: pods}
	status.DRA = servesDRA(mgr)
	var err error
	if status.Nodes, err = informerStore(mgr.GetCache(), &corev1.Node{}); err != nil {
		return err
	}
	if err := status.SetupWithManager(mgr); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	work, err := NodeWorkCache(mgr, namespace)
	if err != nil {
		return err
	}
	rollouts := &RolloutReconciler{Reconciler: upgrade.Reconciler{Client: mgr.GetClient(), Kube: kube,
		Recorder: &events.Recorder{Client: kube}, Namespace: namespace, Pods: pods,
		Queued: upgrade.KueueAdmissions{Reader: mgr.GetAPIReader()}}, Work: work}
	if err := rollouts.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&RolloutDeadlineReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ExclusiveTaintReconciler{Client: mgr.GetClient(), Recorder: &events.Recorder{Client: kube}}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&BindingTargetsReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&HealthReconciler{Reconciler: health.Reconciler{Client: mgr.GetClient(), Kube: kube, Recorder: &events.Recorder{Client: kube},
		Namespace: namespace, Accelerators: accel, Images: HealthImages, Definitions: HealthDefinitions, DRA: status.DRA},
		Work: work, Pods: pods}).SetupWithManager(mgr); err != nil {
		return err
	}
	queues := &QueueReconciler{Client: mgr.GetClient(), Accelerators: accel, Recorder: mgr.GetEventRecorder(Name), DRA: status.DRA,
		Adapters: map[v1alpha1.QueueScheduler]queue.Adapter{
			v1alpha1.QueueKueue:   queue.Kueue{Client: mgr.GetClient()},
			v1alpha1.QueueVolcano: queue.Volcano{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()},
		}}
	if err := queues.SetupWithManager(mgr); err != nil {
		return err
	}
	runs := &StressReconciler{Kube: kube, Recorder: &events.Recorder{Client: kube}, Namespace: namespace, Accelerators: accel, Work: work}
	return runs.SetupWithManager(mgr)
}
