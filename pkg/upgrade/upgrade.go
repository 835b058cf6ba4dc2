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
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Labels and annotations on installer Jobs.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	ManagedBy      = "litepool"
	Component      = "driver-installer"
	// AnnotationJobNode names the node an installer Job is pinned to.
	AnnotationJobNode = "litepool.runwhere.ai/node"
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

// InstallerJobName is the installer Job of a node in one attempt of one rollout: the same
// for the same rollout object (name and uid), node and attempt, so whichever process
// reconciles the rollout (a new leader, the plugin) finds the Job already made rather
// than making a second one; another for every other rollout or attempt.
func InstallerJobName(ro *v1alpha1.DriverRollout, node string, attempt int32) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ro.Name + "\x00" + string(ro.UID) + "\x00" + node + "\x00" + strconv.Itoa(int(attempt))))
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(node), "-"), "-")
	if len(base) > 38 { // the Job name goes into its pods' job-name label: at most 63
		base = strings.TrimRight(base[:38], "-")
	}
	return fmt.Sprintf("litepool-driver-%s-%08x", base, h.Sum32())
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// InstallerJob is the Job that installs a driver on one node, in namespace (litepool's
// own): pinned to the node by nodeName (the node is cordoned, so the scheduler would
// not place it), tolerating every taint, privileged with the host's root at /host, told
// the target in DRIVER_VERSION. The rollout owns it, so deleting the rollout deletes
// its Jobs.
func InstallerJob(ro *v1alpha1.DriverRollout, namespace, node string, attempt int32, timeout time.Duration) *batchv1.Job {
	labels := map[string]string{LabelManagedBy: ManagedBy, LabelComponent: Component}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: InstallerJobName(ro, node, attempt), Namespace: namespace, Labels: labels,
			Annotations: map[string]string{AnnotationJobNode: node, AnnotationJobRollout: ro.Name,
				AnnotationJobRolloutUID: string(ro.UID), AnnotationJobAttempt: strconv.Itoa(int(attempt))},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DriverRollout",
				Name: ro.Name, UID: ro.UID}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{AnnotationJobNode: node}},
				Spec: corev1.PodSpec{
					NodeName:      node,
					RestartPolicy: corev1.RestartPolicyNever,
					HostPID:       true,
					Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "installer", Image: ro.Spec.Installer.Image, Command: ro.Spec.Installer.Command,
						Env: []corev1.EnvVar{
							{Name: "DRIVER_VERSION", Value: ro.Spec.Version},
							{Name: "NODE_NAME", Value: node},
							{Name: "HOST_ROOT", Value: "/host"},
						},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts:    []corev1.VolumeMount{{Name: "host", MountPath: "/host"}},
					}},
					Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
				},
			},
		},
	}
	if timeout > 0 {
		job.Spec.ActiveDeadlineSeconds = ptr.To(int64(timeout.Seconds()))
	}
	return job
}

func isInstaller(p *corev1.Pod) bool {
	return p.Labels[LabelManagedBy] == ManagedBy && p.Labels[LabelComponent] == Component
}
