// Package upgrade carries out driver rollouts (DriverRollout objects): one node's state
// machine (cordon → wait-for-jobs → drain → install → validate → uncordon) as steps
// that never block (Stepper.Step does what can be done now and says whether the state's
// work is finished), and the Reconciler that drives a rollout's nodes through them in
// waves bounded by maxUnavailable and records every node's progress in the object's
// status. The controller runs the Reconciler in its manager; the plugin, when no
// controller runs, runs the same Reconciler in its own process: one code path. The
// rules (transitions, wave planning) are pure functions in pkg/policy; this package
// does the I/O.
//
// Only a DriverRollout's spec makes this package create an installer Job; node
// annotations are state it writes for people and other tools to read, never orders.
package upgrade

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
)

// Labels and annotations on installer Jobs.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	ManagedBy      = "litepool"
	Component      = "driver-installer"
	// AnnotationJobNode names the node an installer Job is pinned to.
	AnnotationJobNode = nodejob.AnnotationNode
	// AnnotationJobRollout names the DriverRollout an installer Job belongs to.
	AnnotationJobRollout = "litepool.runwhere.ai/rollout"
	// AnnotationJobRolloutUID is that DriverRollout's uid: a Job of an earlier rollout
	// of the same name is never taken for this one's.
	AnnotationJobRolloutUID = "litepool.runwhere.ai/rollout-uid"
	// AnnotationJobAttempt is the node's attempt the Job belongs to.
	AnnotationJobAttempt = "litepool.runwhere.ai/attempt"
)

// Defaults of a rollout's timeouts when its spec leaves them out.
const (
	DefaultWaitTimeout     = 10 * time.Minute
	DefaultDrainTimeout    = 5 * time.Minute
	DefaultInstallTimeout  = 30 * time.Minute
	DefaultValidateTimeout = 10 * time.Minute
)

// Timeouts are a rollout's step timeouts; 0 means none (for wait-for-jobs: no wait).
type Timeouts struct {
	Wait, Drain, Install, Validate time.Duration
}

// TimeoutsOf reads a rollout's timeouts, with the defaults.
func TimeoutsOf(s *v1alpha1.DriverRolloutSpec) Timeouts {
	d := func(v *metav1.Duration, def time.Duration) time.Duration {
		if v == nil {
			return def
		}
		return v.Duration
	}
	return Timeouts{Wait: d(s.WaitTimeout, DefaultWaitTimeout), Drain: d(s.DrainTimeout, DefaultDrainTimeout),
		Install: d(s.InstallTimeout, DefaultInstallTimeout), Validate: d(s.ValidateTimeout, DefaultValidateTimeout)}
}

// InstallerSpec is the work that installs a driver on one node in one attempt of one
// rollout: privileged with the host's root at /host, told the target in
// DRIVER_VERSION. The rollout controls it, so deleting the rollout deletes its Jobs.
// Its image is approved by the rollout itself: creating a DriverRollout is the right to
// run its installer as root on the nodes it names, which only the operator's role has.
func InstallerSpec(ro *v1alpha1.DriverRollout, node string, attempt int32, timeout time.Duration) nodejob.Spec {
	return nodejob.Spec{Owner: ro, OwnerKind: v1alpha1.GroupVersion.WithKind("DriverRollout"), Node: node, Purpose: Component,
		Key: strconv.Itoa(int(attempt)), Image: ro.Spec.Installer.Image, Command: ro.Spec.Installer.Command, HostAccess: true,
		Env: []corev1.EnvVar{{Name: "DRIVER_VERSION", Value: ro.Spec.Version}}, Timeout: timeout,
		Approved: []string{ro.Spec.Installer.Image}, ApprovedBy: "DriverRollout " + ro.Name,
		Annotations: map[string]string{AnnotationJobRollout: ro.Name, AnnotationJobRolloutUID: string(ro.UID),
			AnnotationJobAttempt: strconv.Itoa(int(attempt))}}
}

// InstallerJobName is the installer Job of a node in one attempt of one rollout: the same
// for the same rollout object (its uid), node and attempt, so whichever process
// reconciles the rollout (a new leader, the plugin) finds the Job already made rather
// than making a second one; another for every other rollout or attempt.
func InstallerJobName(ro *v1alpha1.DriverRollout, node string, attempt int32) string {
	return nodejob.Name(InstallerSpec(ro, node, attempt, 0))
}

// InstallerJob is the Job InstallerSpec describes, in namespace (litepool's own).
func InstallerJob(ro *v1alpha1.DriverRollout, namespace, node string, attempt int32, timeout time.Duration) *batchv1.Job {
	return nodejob.Job(InstallerSpec(ro, node, attempt, timeout), namespace, nodejob.DefaultTTL)
}
