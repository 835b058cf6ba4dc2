// Package stress runs accelerator stress tests on a pool's idle nodes (one test pod per
// node, pinned to it and holding all its accelerators), collects each node's result and
// marks nodes that fail runwhere.ai/health=degraded, which every listing shows as
// Degraded. Busy, cordoned and NotReady nodes are skipped and reported: a stress test
// never competes with real work.
package stress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Labels on stress-test pods.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	LabelInstance  = "app.kubernetes.io/instance"
	Component      = "stress-test"
)

// Tests are the known stress tests.
var Tests = []string{"npu", "hccs", "roce", "storage"}

// ValidateTests checks --tests ([T1]).
func ValidateTests(tests []string) error {
	if len(tests) == 0 {
		return policy.Violationf("T1", "no stress tests given: choose from %s", strings.Join(Tests, ", "))
	}
	for _, t := range tests {
		ok := false
		for _, k := range Tests {
			ok = ok || t == k
		}
		if !ok {
			return policy.Violationf("T1", "unknown stress test %q: choose from %s", t, strings.Join(Tests, ", "))
		}
	}
	return nil
}

// Options of a run.
type Options struct {
	Pool      string
	Image     string
	Command   []string
	Tests     []string
	Namespace string
	Timeout   time.Duration
	KeepPods  bool
	DryRun    cmdutil.DryRunStrategy
	Poll      time.Duration
	Progress  io.Writer
	// RunID labels the run's pods (app.kubernetes.io/instance); default: the start time.
	RunID string
	// Accelerators says which resources a test pod holds; the zero value is the known set.
	Accelerators policy.Accelerators
}

// Result values.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
)

// NodeResult is one node's outcome.
type NodeResult struct {
	Node   string `json:"node"`
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
	Pod    string `json:"pod,omitempty"`
}

// Runner runs stress tests.
type Runner struct {
	Kube     kubernetes.Interface
	Recorder *events.Recorder
}

// Run tests every idle node of the pool and records the results on the nodes.
func (r *Runner) Run(ctx context.Context, o Options) ([]NodeResult, error) {
	nodes, err := r.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: o.Pool}.String()})
	if err != nil {
		return nil, err
	}
	if len(nodes.Items) == 0 {
		return nil, fmt.Errorf("pool %q has no nodes (no node carries %s=%s)", o.Pool, policy.LabelPool, o.Pool)
	}
	busy, err := r.workloadPods(ctx)
	if err != nil {
		return nil, err
	}
	runID := o.RunID
	if runID == "" {
		runID = NewRunID()
	}
	var results []NodeResult
	pods := map[string]*corev1.Pod{} // by node
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if reason := skipReason(n, busy[n.Name]); reason != "" {
			results = append(results, NodeResult{Node: n.Name, Result: Skipped, Detail: reason})
			continue
		}
		pod := TestPod(o, runID, n)
		if o.DryRun != cmdutil.DryRunClient {
			opts := metav1.CreateOptions{DryRun: nodeops.ServerDryRun(o.DryRun)}
			created, err := r.Kube.CoreV1().Pods(o.Namespace).Create(ctx, pod, opts)
			if err != nil {
				return nil, fmt.Errorf("creating the stress-test pod for node %s: %w", n.Name, err)
			}
			pod = created
		}
		pods[n.Name] = pod
		say(o.Progress, "node/%s: stress test %s started (pod %s/%s)", n.Name, strings.Join(o.Tests, ","), o.Namespace, pod.Name)
	}
	if o.DryRun != cmdutil.DryRunNone {
		for node := range pods {
			results = append(results, NodeResult{Node: node, Result: "would test"})
		}
		sortResults(results)
		return results, nil
	}
	results = append(results, r.collect(ctx, o, pods)...)
	sortResults(results)
	for i := range results {
		if err := r.record(ctx, o, nodeByName(nodes.Items, results[i].Node), &results[i]); err != nil {
			return results, err
		}
	}
	return results, nil
}

// NewRunID names a run by its start time.
func NewRunID() string { return time.Now().UTC().Format("20060102-150405") }

func sortResults(rs []NodeResult) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Node < rs[j].Node })
}

func nodeByName(nodes []corev1.Node, name string) *corev1.Node {
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}

func say(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
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

func (r *Runner) workloadPods(ctx context.Context) (map[string][]string, error) {
	list, err := r.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i := range list.Items {
		p := &list.Items[i]
		if inventory.IsWorkloadPod(p) && p.Labels[LabelComponent] != Component {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Namespace+"/"+p.Name)
		}
	}
	return out, nil
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// TestPod is the stress-test pod of one node: pinned to it, tolerating its taints,
// holding every accelerator it has, told the tests in STRESS_TESTS.
func TestPod(o Options, runID string, n *corev1.Node) *corev1.Pod {
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(n.Name), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	limits := corev1.ResourceList{}
	if rn, count := o.Accelerators.NodeAccelerators(n); count > 0 {
		limits[rn] = *resource.NewQuantity(n.Status.Allocatable.Name(rn, resource.DecimalSI).Value(), resource.DecimalSI)
	}
	var deadline *int64
	if o.Timeout > 0 {
		secs := int64(o.Timeout.Seconds())
		deadline = &secs
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "litepool-stress-" + base + "-",
			Namespace:    o.Namespace,
			Labels:       map[string]string{LabelManagedBy: "litepool", LabelComponent: Component, LabelInstance: runID},
			Annotations:  map[string]string{"litepool.runwhere.ai/node": n.Name},
		},
		Spec: corev1.PodSpec{
			NodeName:              n.Name,
			RestartPolicy:         corev1.RestartPolicyNever,
			ActiveDeadlineSeconds: deadline,
			Tolerations:           []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "stress", Image: o.Image, Command: o.Command,
				Env: []corev1.EnvVar{
					{Name: "STRESS_TESTS", Value: strings.Join(o.Tests, ",")},
					{Name: "NODE_NAME", Value: n.Name},
					{Name: "POOL", Value: o.Pool},
				},
				Resources: corev1.ResourceRequirements{Limits: limits},
			}},
		},
	}
}

// collect waits for every pod to finish (or the timeout) and reads its result.
func (r *Runner) collect(ctx context.Context, o Options, pods map[string]*corev1.Pod) []NodeResult {
	poll := o.Poll
	if poll <= 0 {
		poll = time.Second
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	final := map[string]*corev1.Pod{}
	_ = wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		for node, p := range pods {
			if final[node] != nil {
				continue
			}
			got, err := r.Kube.CoreV1().Pods(o.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			if got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed {
				final[node] = got
				say(o.Progress, "node/%s: %s", node, strings.ToLower(string(got.Status.Phase)))
			}
		}
		return len(final) == len(pods), nil
	})
	var out []NodeResult
	for node, p := range pods {
		res := NodeResult{Node: node, Pod: o.Namespace + "/" + p.Name}
		got := final[node]
		switch {
		case got == nil:
			res.Result, res.Detail = Failed, fmt.Sprintf("did not finish within %s", timeout)
		case got.Status.Phase == corev1.PodSucceeded:
			res.Result, res.Detail = Passed, "exit 0"
		default:
			res.Result, res.Detail = Failed, failureDetail(got)
		}
		keep := o.KeepPods || res.Result == Failed && got != nil
		if !keep {
			_ = r.Kube.CoreV1().Pods(o.Namespace).Delete(context.WithoutCancel(ctx), p.Name, metav1.DeleteOptions{})
		}
		out = append(out, res)
	}
	return out
}

func failureDetail(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			d := fmt.Sprintf("exit %d", t.ExitCode)
			if t.Reason != "" {
				d += " (" + t.Reason + ")"
			}
			if t.Message != "" {
				d += ": " + t.Message
			}
			return d
		}
	}
	if p.Status.Reason != "" || p.Status.Message != "" {
		return strings.TrimSpace(p.Status.Reason + " " + p.Status.Message)
	}
	return "pod failed"
}

// record labels the node with its health and keeps the result in an annotation; a
// failed node gets a Warning event.
func (r *Runner) record(ctx context.Context, o Options, n *corev1.Node, res *NodeResult) error {
	if n == nil || res.Result == Skipped {
		return nil
	}
	health := policy.HealthHealthy
	if res.Result == Failed {
		health = policy.HealthDegraded
	}
	summary := fmt.Sprintf("%s %s at %s: %s", strings.Join(o.Tests, ","), res.Result, time.Now().UTC().Format(time.RFC3339), res.Detail)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{policy.LabelHealth: health},
		"annotations": map[string]string{policy.AnnotationStressResult: summary},
	}})
	if _, err := r.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("recording the stress result on node %s: %w", n.Name, err)
	}
	if res.Result == Failed {
		_ = r.Recorder.Warning(ctx, events.NodeRef(n), "StressTestFailed", "stress test %s: node marked %s=%s", summary, policy.LabelHealth, health)
	} else {
		_ = r.Recorder.Normal(ctx, events.NodeRef(n), "StressTestPassed", "stress test %s", summary)
	}
	return nil
}
