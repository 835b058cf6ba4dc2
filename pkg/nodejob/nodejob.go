// Package nodejob is the one way litepool runs work on a node: a driver installer of a
// rollout, a remediation of the health loop, a test of a stress run. A Spec says what
// runs (owner, node, purpose, key, image, command, environment, host access,
// accelerators held, timeout); Job builds the Job and Pod the bare pod (a stress run
// reads each test's pod itself), both from one pod template, the only place litepool
// builds a pod that runs on a node, privileged or not. Runner.Ensure and
// Runner.EnsurePod make them once (the name is fixed by the owner's uid, the node, the
// purpose and the key, so a second reconcile, a new leader or the plugin finds it
// rather than making another) after checking the image is approved, Runner.Outcome
// reads how a Job went, and IsNodeWork tells its pods from everybody else's in every
// busy, workload and drain decision.
//
// Every Job it makes runs in litepool's own namespace, is controlled by its owner (so
// deleting the owner deletes it), is deleted a while after it finishes
// (ttlSecondsAfterFinished), is never retried (backoffLimit 0: a second attempt is the
// caller's decision, under a new key), is bounded (activeDeadlineSeconds) and mounts no
// service-account token: work on a node gets its rights from the node, never from
// litepool's namespace.
package nodejob

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Labels and annotations on every Job and pod this package makes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	ManagedBy      = "litepool"
	// AnnotationNode names the node the work is pinned to.
	AnnotationNode = "litepool.runwhere.ai/node"
	// AnnotationKey is the Spec's key (an attempt, an episode).
	AnnotationKey = "litepool.runwhere.ai/key"
	// HostRoot is where the host's root is mounted in a Job with host access.
	HostRoot = "/host"
)

// PullSecrets are the Secrets, in litepool's namespace, every node-work pod pulls its
// image with (the controller's --node-work-image-pull-secret): an installer, a remediation
// or a stress test image in a private registry. The operator chooses them when starting
// the controller; no Pool, DriverRollout or StressRun names one, so a person who may edit
// those cannot make litepool pull with a registry credential of their choosing. Set once
// at start, before any work is made.
var PullSecrets []string

// DefaultTTL is how long a finished Job stays for people to read before it is deleted.
const DefaultTTL = 24 * time.Hour

// Spec is one piece of work on one node.
type Spec struct {
	// Owner controls the Job: a DriverRollout, a Pool. Its uid is part of the name.
	Owner metav1.Object
	// OwnerKind is the owner's group, version and kind.
	OwnerKind schema.GroupVersionKind
	Node      string
	// Purpose is the Job's component label and name prefix: driver-installer,
	// remediation.
	Purpose string
	// Key tells apart two pieces of work of one owner, node and purpose (an attempt,
	// a fault episode); the same key is the same Job.
	Key     string
	Image   string
	Command []string
	Env     []corev1.EnvVar
	// HostAccess runs the container privileged, in the host's PID namespace, with the
	// host's root at HostRoot (HOST_ROOT in its environment).
	HostAccess bool
	// Accelerators are held by the pod (its limits), so nothing else is placed on them
	// while it runs.
	Accelerators corev1.ResourceList
	// Timeout bounds the Job (activeDeadlineSeconds); 0 leaves it unbounded.
	Timeout time.Duration
	// Approved are the images the operator approved for this purpose (matched by
	// policy.ImageApproved), and ApprovedBy says where that approval is written, for
	// the refusal.
	Approved   []string
	ApprovedBy string
	// Annotations are added to the Job's or pod's (for people and older readers).
	Annotations map[string]string
	// Labels are added to the pod's (a stress test's run, which its readers select).
	Labels map[string]string
	// Name, when set, names a bare pod (Pod): one its owner already names from what
	// identifies it (a StressRun's run, node and test, which its status shows), unique
	// for the owner as Name(s) is.
	Name string
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Name is the Job's name: litepool-PURPOSE-NODE-HASH, where HASH is of the owner's
// uid, the node, the purpose and the key; at most 63 characters (the Job's name goes
// into its pods' job-name label), a DNS label.
func Name(s Spec) string {
	h := fnv.New64a()
	for _, part := range []string{string(s.Owner.GetUID()), s.Node, s.Purpose, s.Key} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	return BoundedName("litepool-"+s.Purpose+"-", s.Node, h.Sum64())
}

// BoundedName is prefix, node (lowercased, what a DNS label may not hold turned into
// dashes, cut to fit) and sum in 12 hex digits: at most 63 characters.
func BoundedName(prefix, node string, sum uint64) string {
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(node), "-"), "-")
	if max := 63 - len(prefix) - 13; len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	if base == "" {
		return fmt.Sprintf("%s%012x", prefix, sum&0xffffffffffff)
	}
	return fmt.Sprintf("%s%s-%012x", prefix, base, sum&0xffffffffffff)
}

// template is the pod of s: pinned to the node by nodeName (a cordoned or quarantined
// node is still reached), tolerating every taint, no service-account token, the
// accelerators s holds in its limits, host access only when s asks for it, and the
// operator's PullSecrets.
func template(s Spec) corev1.PodTemplateSpec {
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy], labels[LabelComponent] = ManagedBy, s.Purpose
	c := corev1.Container{Name: s.Purpose, Image: s.Image, Command: s.Command,
		Env: append(append([]corev1.EnvVar{}, s.Env...), corev1.EnvVar{Name: "NODE_NAME", Value: s.Node})}
	if len(s.Accelerators) > 0 {
		c.Resources.Limits = s.Accelerators.DeepCopy()
	}
	pod := corev1.PodSpec{
		NodeName: s.Node, RestartPolicy: corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
	}
	if s.HostAccess {
		pod.HostPID = true
		c.Env = append(c.Env, corev1.EnvVar{Name: "HOST_ROOT", Value: HostRoot})
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: HostRoot}}
		pod.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	}
	pod.Containers = []corev1.Container{c}
	for _, name := range PullSecrets {
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{AnnotationNode: s.Node}}, Spec: pod}
}

func annotations(s Spec) map[string]string {
	out := map[string]string{AnnotationNode: s.Node, AnnotationKey: s.Key}
	for k, v := range s.Annotations {
		out[k] = v
	}
	return out
}

// Job is the Job of s in namespace.
func Job(s Spec, namespace string, ttl time.Duration) *batchv1.Job {
	t := template(s)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: Name(s), Namespace: namespace,
			Labels:          map[string]string{LabelManagedBy: ManagedBy, LabelComponent: s.Purpose},
			Annotations:     annotations(s),
			OwnerReferences: []metav1.OwnerReference{ControllerRef(s.Owner, s.OwnerKind)}},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To(int32(ttl.Seconds())),
			Template:                t,
		},
	}
	if s.Timeout > 0 {
		job.Spec.ActiveDeadlineSeconds = ptr.To(int64(s.Timeout.Seconds()))
	}
	return job
}

// Pod is the bare pod of s in namespace, controlled by its owner (deleting the owner
// deletes it; the owner deletes it once it has read it), named s.Name or Name(s).
func Pod(s Spec, namespace string) *corev1.Pod {
	t := template(s)
	name := s.Name
	if name == "" {
		name = Name(s)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: t.Labels, Annotations: annotations(s),
			OwnerReferences: []metav1.OwnerReference{ControllerRef(s.Owner, s.OwnerKind)}},
		Spec: t.Spec,
	}
	if s.Timeout > 0 {
		pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(s.Timeout.Seconds()))
	}
	return pod
}

// ControllerRef is a controller reference to owner that does not block the owner's
// deletion: setting blockOwnerDeletion needs update on the owner's finalizers, a right
// litepool's controller has no other use for.
func ControllerRef(owner metav1.Object, kind schema.GroupVersionKind) metav1.OwnerReference {
	ref := metav1.NewControllerRef(owner, kind)
	ref.BlockOwnerDeletion = nil
	return *ref
}

// NotApprovedError is an image the operator has not approved for a purpose.
type NotApprovedError struct {
	Purpose, Image, ApprovedBy string
}

func (e *NotApprovedError) Error() string {
	return fmt.Sprintf("the %s image %s is not among the images the operator approved (%s)", e.Purpose, e.Image, e.ApprovedBy)
}

// Approve is the operator's approval of s's image: nil, or a NotApprovedError. A
// caller that decides something from it (hold a node out) asks here; Ensure asks
// again before it makes anything.
func Approve(s Spec) error { return ApproveImage(s.Purpose, s.Image, s.Approved, s.ApprovedBy) }

// ApproveImage is Approve of an image that runs through another object (a StressRun).
func ApproveImage(purpose, image string, approved []string, by string) error {
	if !policy.ImageApproved(image, approved) {
		return &NotApprovedError{Purpose: purpose, Image: image, ApprovedBy: by}
	}
	return nil
}

// IsNotApproved says whether err is a NotApprovedError.
func IsNotApproved(err error) bool {
	var e *NotApprovedError
	return errors.As(err, &e)
}

// ForeignError is a Job of the expected name that another owner controls.
type ForeignError struct {
	// Kind is job (when empty) or pod.
	Kind                   string
	Namespace, Name, Owner string
}

func (e *ForeignError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = "job"
	}
	return fmt.Sprintf("%s %s/%s exists and belongs to %s: delete it, then retry", kind, e.Namespace, e.Name, e.Owner)
}

// Runner makes and reads node Jobs in litepool's namespace.
type Runner struct {
	Kube kubernetes.Interface
	// Cache, when set (the controller's cache of litepool's namespace, which it
	// watches), is where Jobs and their pods are read; without it (the plugin) they are
	// read live. Jobs are made live either way.
	Cache client.Reader
	// Namespace is litepool's own: the only one node work runs in.
	Namespace string
	// TTL is how long a finished Job stays (DefaultTTL when 0).
	TTL time.Duration
}

// get reads the Job name, from the cache when there is one.
func (r *Runner) get(ctx context.Context, name string) (*batchv1.Job, error) {
	if r.Cache == nil {
		return r.Kube.BatchV1().Jobs(r.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	var job batchv1.Job
	if err := r.Cache.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// pods lists the Job name's pods, from the cache when there is one.
func (r *Runner) pods(ctx context.Context, name string) ([]corev1.Pod, error) {
	if r.Cache == nil {
		pods, err := r.Kube.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil {
			return nil, err
		}
		return pods.Items, nil
	}
	var pods corev1.PodList
	if err := r.Cache.List(ctx, &pods, client.InNamespace(r.Namespace), client.MatchingLabels{batchv1.JobNameLabel: name}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// Ensure makes s's Job unless it exists (the same name is the same work) and returns
// it. The image is checked against s.Approved first, here and nowhere else: an image
// the operator did not approve is never run.
func (r *Runner) Ensure(ctx context.Context, s Spec) (*batchv1.Job, error) {
	if err := Approve(s); err != nil {
		return nil, err
	}
	if r.Namespace == "" {
		return nil, fmt.Errorf("no namespace for %s Jobs", s.Purpose)
	}
	ttl := r.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	want := Job(s, r.Namespace, ttl)
	jobs := r.Kube.BatchV1().Jobs(r.Namespace)
	job, err := r.get(ctx, want.Name)
	if apierrors.IsNotFound(err) {
		job, err = jobs.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			job, err = jobs.Get(ctx, want.Name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s job %s/%s: %w", s.Purpose, r.Namespace, want.Name, err)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != s.Owner.GetUID() {
		owner := "no owner"
		if ref != nil {
			owner = fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
		}
		return nil, &ForeignError{Namespace: job.Namespace, Name: job.Name, Owner: owner}
	}
	return job, nil
}

// EnsurePod makes s's bare pod unless it exists (the same name is the same work) and
// returns it, after the same approval as Ensure.
func (r *Runner) EnsurePod(ctx context.Context, s Spec) (*corev1.Pod, error) {
	if err := Approve(s); err != nil {
		return nil, err
	}
	if r.Namespace == "" {
		return nil, fmt.Errorf("no namespace for %s pods", s.Purpose)
	}
	want := Pod(s, r.Namespace)
	pods := r.Kube.CoreV1().Pods(r.Namespace)
	pod, err := pods.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		pod, err = pods.Get(ctx, want.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("%s pod %s/%s: %w", s.Purpose, r.Namespace, want.Name, err)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != s.Owner.GetUID() {
		owner := "no owner"
		if ref != nil {
			owner = fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
		}
		return nil, &ForeignError{Kind: "pod", Namespace: pod.Namespace, Name: pod.Name, Owner: owner}
	}
	return pod, nil
}

// Phase is where a node Job is.
type Phase string

// Phases of a node Job.
const (
	// NoPod: the Job has no running pod yet; Outcome.Message says why if it can.
	NoPod     Phase = "NoPod"
	Running   Phase = "Running"
	Succeeded Phase = "Succeeded"
	Failed    Phase = "Failed"
	// Gone: the Job does not exist (never made, deleted, or past its TTL).
	Gone Phase = "Gone"
)

// Outcome is how a node Job went.
type Outcome struct {
	Phase Phase
	// ExitCode is the container's, once it ended.
	ExitCode *int32
	Message  string
}

// Outcome reads the Job name and its pods.
func (r *Runner) Outcome(ctx context.Context, name string) (Outcome, error) {
	job, err := r.get(ctx, name)
	if apierrors.IsNotFound(err) {
		return Outcome{Phase: Gone, Message: fmt.Sprintf("job %s/%s does not exist", r.Namespace, name)}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	pods, err := r.pods(ctx, name)
	if err != nil {
		return Outcome{}, err
	}
	return OutcomeOf(job, pods), nil
}

// OutcomeOf is how job went, from its conditions and its pods (for the exit code and
// what the container said, or why no pod runs).
func OutcomeOf(job *batchv1.Job, pods []corev1.Pod) Outcome {
	ref := job.Namespace + "/" + job.Name
	var pod *corev1.Pod
	for i := range pods {
		if pod == nil || pods[i].CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = &pods[i]
		}
	}
	term := terminated(pod)
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			o := Outcome{Phase: Succeeded, Message: "job " + ref + " completed"}
			if term != nil {
				o.ExitCode = ptr.To(term.ExitCode)
			}
			return o
		case batchv1.JobFailed:
			o := Outcome{Phase: Failed, Message: fmt.Sprintf("job %s failed: %s", ref, strings.TrimSpace(c.Reason+" "+c.Message))}
			if term != nil {
				o.ExitCode = ptr.To(term.ExitCode)
				o.Message += fmt.Sprintf("; exit %d", term.ExitCode)
				if term.Reason != "" {
					o.Message += " (" + term.Reason + ")"
				}
				if term.Message != "" {
					o.Message += ": " + strings.TrimSpace(term.Message)
				}
			}
			return o
		}
	}
	if pod == nil {
		// A Job whose pods cannot be made (Pod Security, a quota) says so only in its
		// events.
		return Outcome{Phase: NoPod, Message: fmt.Sprintf("job %s has no pod yet: `kubectl -n %s describe job %s` says why if it stays so", ref, job.Namespace, job.Name)}
	}
	if pod.Status.Phase == corev1.PodRunning {
		return Outcome{Phase: Running, Message: fmt.Sprintf("job %s running (pod %s)", ref, pod.Name)}
	}
	why := "pod " + pod.Name + " is " + string(pod.Status.Phase)
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			why += ": " + strings.TrimSpace(w.Reason+" "+w.Message)
		}
	}
	return Outcome{Phase: NoPod, Message: fmt.Sprintf("job %s has not started: %s", ref, why)}
}

func terminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	if p == nil {
		return nil
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	return nil
}

// IsNodeWork says whether pod is litepool's node work (an installer, a remediation, a
// stress test), which no busy, workload or drain decision counts as a tenant's. Its
// labels and owner references are claims whoever made the pod wrote, so they only
// say which kind of work it is; what makes them believable is namespace: litepool's
// own, which only the operator and litepool may write. A pod anywhere else is a
// tenant's, whatever it says about itself.
func IsNodeWork(pod *corev1.Pod, namespace string) bool {
	if namespace == "" || pod.Namespace != namespace || pod.Labels[LabelManagedBy] != ManagedBy {
		return false
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return (gv.Group == batchv1.GroupName && ref.Kind == "Job") || (gv.Group == v1alpha1.GroupVersion.Group && ref.Kind == "StressRun")
}
