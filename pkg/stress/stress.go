// Package stress runs accelerator stress tests on a pool's idle nodes: one test pod per
// node and test, pinned to the node and holding all its accelerators, in litepool's own
// namespace. A node's tests run one after the other; a node that fails one is labelled
// runwhere.ai/health=degraded, which every listing shows as Degraded. Busy, cordoned
// and NotReady nodes are skipped and reported: a stress test never competes with real
// work.
//
// A run is a StressRun object. Its steps (Plan, TestPod, PodOutcome, RecordNode) are
// called one at a time by Reconciler, which litepool's controller runs in its manager
// and the plugin runs in its own process when no controller takes the run: one code
// path.
package stress

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Labels and annotations on stress-test pods.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	// LabelInstance names the pod's StressRun.
	LabelInstance = "app.kubernetes.io/instance"
	Component     = "stress-test"
	// AnnotationNode and AnnotationTest say what the pod tests.
	AnnotationNode = "litepool.runwhere.ai/node"
	AnnotationTest = "litepool.runwhere.ai/test"
)

// DefaultNamespace is litepool's namespace in deploy/webhook: the only place test pods run.
const DefaultNamespace = "litepool-system"

// DefaultTimeout is how long one test pod may run when the run does not say.
const DefaultTimeout = 30 * time.Minute

// Target is a node a run considered: tested, or skipped for Skip's reason.
type Target struct {
	Node string
	Skip string
}

// Plan is the first step of a run: the pool's members (or those of only that are
// members), each tested or skipped with its reason, by name. It reads the nodes and
// every running pod once, live: a run starts from what is true now. namespace is
// litepool's own: node work there (nodejob.IsNodeWork) does not make a node busy.
func Plan(ctx context.Context, kube kubernetes.Interface, namespace, pool string, only []string) ([]Target, error) {
	targets, _, err := plan(ctx, kube, namespace, pool, only)
	return targets, err
}

// plan is Plan, and the pool's members it read, by name.
func plan(ctx context.Context, kube kubernetes.Interface, namespace, pool string, only []string) ([]Target, map[string]*corev1.Node, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: pool}.String()})
	if err != nil {
		return nil, nil, err
	}
	if len(nodes.Items) == 0 {
		return nil, nil, fmt.Errorf("pool %q has no nodes (no node carries %s=%s)", pool, policy.LabelPool, pool)
	}
	busy, err := workloadPods(ctx, kube, namespace)
	if err != nil {
		return nil, nil, err
	}
	members := map[string]*corev1.Node{}
	for i := range nodes.Items {
		members[nodes.Items[i].Name] = &nodes.Items[i]
	}
	names := only
	if len(names) == 0 {
		for name := range members {
			names = append(names, name)
		}
	}
	var out []Target
	for _, name := range names {
		n, ok := members[name]
		if !ok {
			out = append(out, Target{Node: name, Skip: fmt.Sprintf("not a member of pool %s", pool)})
			continue
		}
		out = append(out, Target{Node: name, Skip: skipReason(n, busy[name])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, members, nil
}

// skipReason says why a node is not tested: NotReady, cordoned, or running work.
func skipReason(n *corev1.Node, workload []string) string {
	switch {
	case !policy.IsNodeReady(n):
		return "NotReady"
	case n.Spec.Unschedulable:
		return "cordoned"
	case len(workload) > 0:
		sort.Strings(workload)
		return fmt.Sprintf("busy: %d workload pod(s): %s", len(workload), strings.Join(workload, ", "))
	}
	return ""
}

func workloadPods(ctx context.Context, kube kubernetes.Interface, namespace string) (map[string][]string, error) {
	list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i := range list.Items {
		p := &list.Items[i]
		if inventory.IsWorkloadPod(p) && !nodejob.IsNodeWork(p, namespace) {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Namespace+"/"+p.Name)
		}
	}
	return out, nil
}

// PodName is the test pod of run, node and test: the same name every time, so that a
// reconciler that lost track of a pod it created finds it (AlreadyExists) rather than
// running the test twice. Too long a name keeps its start and gains a hash of the whole.
func PodName(run, node, test string) string {
	name := run + "-" + node + "-" + test
	if len(name) <= 63 {
		return name
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return strings.TrimRight(name[:54], "-.") + fmt.Sprintf("-%08x", h.Sum32())
}

// TestPod is the pod of one test on one node, in namespace (nodejob.Pod): pinned to
// the node, tolerating its taints, holding every accelerator it has, told the test in
// STRESS_TESTS, controlled by the run (deleting the run deletes its pods), with no
// host access.
func TestPod(run *v1alpha1.StressRun, namespace string, n *corev1.Node, test string, accel policy.Accelerators) *corev1.Pod {
	return nodejob.Pod(TestSpec(run, n, test, accel), namespace)
}

// TestSpec is the node work of one test on one node. Its image is the run's: whoever
// may create StressRuns chooses it, as whoever may create DriverRollouts chooses an
// installer's.
func TestSpec(run *v1alpha1.StressRun, n *corev1.Node, test string, accel policy.Accelerators) nodejob.Spec {
	limits := corev1.ResourceList{}
	if rn, count := accel.NodeAccelerators(n); count > 0 {
		limits[rn] = *resource.NewQuantity(n.Status.Allocatable.Name(rn, resource.DecimalSI).Value(), resource.DecimalSI)
	}
	return nodejob.Spec{Owner: run, OwnerKind: v1alpha1.GroupVersion.WithKind("StressRun"), Node: n.Name,
		Purpose: Component, Key: test, Name: PodName(run.Name, n.Name, test),
		Image: run.Spec.Image, Command: run.Spec.Command,
		Env:          []corev1.EnvVar{{Name: "STRESS_TESTS", Value: test}, {Name: "POOL", Value: run.Spec.Pool}},
		Accelerators: limits, Timeout: Timeout(run),
		Approved: []string{run.Spec.Image}, ApprovedBy: "StressRun " + run.Name,
		Labels: map[string]string{LabelInstance: run.Name}, Annotations: map[string]string{AnnotationTest: test}}
}

// Timeout is how long one test pod of run may run.
func Timeout(run *v1alpha1.StressRun) time.Duration {
	if run.Spec.Timeout != nil && run.Spec.Timeout.Duration > 0 {
		return run.Spec.Timeout.Duration
	}
	return DefaultTimeout
}

// PodOutcome reads a test pod: Passed or Failed once it ended (with its exit code and
// what the container said), else Running.
func PodOutcome(p *corev1.Pod) (outcome v1alpha1.StressOutcome, exitCode *int32, message string) {
	var term *corev1.ContainerStateTerminated
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			term = cs.State.Terminated
		}
	}
	if term != nil {
		exitCode = ptr.To(term.ExitCode)
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return v1alpha1.StressOutcomePassed, exitCode, "exit 0"
	case corev1.PodFailed:
		return v1alpha1.StressOutcomeFailed, exitCode, failureDetail(p, term)
	}
	return v1alpha1.StressOutcomeRunning, nil, ""
}

func failureDetail(p *corev1.Pod, t *corev1.ContainerStateTerminated) string {
	if t != nil {
		d := fmt.Sprintf("exit %d", t.ExitCode)
		if t.Reason != "" {
			d += " (" + t.Reason + ")"
		}
		if t.Message != "" {
			d += ": " + t.Message
		}
		return d
	}
	if p.Status.Reason != "" || p.Status.Message != "" {
		return strings.TrimSpace(p.Status.Reason + " " + p.Status.Message)
	}
	return "pod failed"
}

// RecordNode is a node's last step in run: its health label (healthy, or degraded
// when failed), the summary in its runwhere.ai/stress-result annotation, and an Event.
// A node whose annotation already names run was recorded (by this reconciler before a
// status write that failed, or by another): it is left as it is, so a step taken
// twice from a stale read records one Event.
func RecordNode(ctx context.Context, kube kubernetes.Interface, rec *events.Recorder, node, run, summary string, failed bool) error {
	cur, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if strings.Contains(cur.Annotations[policy.AnnotationStressResult], RunMark(run)) {
		return nil
	}
	health := policy.HealthHealthy
	if failed {
		health = policy.HealthDegraded
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{policy.LabelHealth: health},
		"annotations": map[string]string{policy.AnnotationStressResult: summary},
	}})
	n, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording the stress result on node %s: %w", node, err)
	}
	if rec == nil {
		return nil
	}
	if failed {
		_ = rec.Warning(ctx, events.NodeRef(n), "StressTestFailed", "stress test %s: node marked %s=%s", summary, policy.LabelHealth, health)
	} else {
		_ = rec.Normal(ctx, events.NodeRef(n), "StressTestPassed", "stress test %s", summary)
	}
	return nil
}

// RunMark names run in a node's stress-result summary.
func RunMark(run string) string { return "(stress run " + run + ")" }
