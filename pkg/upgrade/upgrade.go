// Package upgrade runs driver upgrades against the cluster: one node's state machine
// (cordon → wait-for-jobs → drain → install → validate → uncordon) and pool-wide rollouts
// in waves bounded by max-unavailable. Every step is recorded in the node's annotations
// before the next begins, so a rollout whose plugin died continues from the cluster's
// state (`upgrade resume`) and never redoes a finished node. The rules (transitions,
// wave planning) are pure functions in pkg/policy; this package does the I/O.
package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Labels on installer Jobs.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	ManagedBy      = "litepool"
	Component      = "driver-installer"
	// AnnotationJobNode names the node an installer Job is pinned to.
	AnnotationJobNode = "litepool.runwhere.ai/node"
	// AnnotationJobRollout names the rollout an installer Job belongs to.
	AnnotationJobRollout = "litepool.runwhere.ai/rollout"
)

// Upgrader talks to the cluster.
type Upgrader struct {
	Kube     kubernetes.Interface
	Recorder *events.Recorder
	// Progress receives one line per step; nil discards.
	Progress io.Writer
	// Poll is how often waits look again (default 1s).
	Poll time.Duration

	mu sync.Mutex
}

func (u *Upgrader) poll() time.Duration {
	if u.Poll > 0 {
		return u.Poll
	}
	return time.Second
}

func (u *Upgrader) say(format string, args ...any) {
	if u.Progress == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	fmt.Fprintf(u.Progress, format+"\n", args...)
}

// ErrFailed wraps a node's failure.
var ErrFailed = errors.New("driver upgrade failed")

// Mark puts nodes into a rollout: state upgrade-required, the target and the rollout's
// parameters. It refuses nodes that are inside another rollout.
func (u *Upgrader) Mark(ctx context.Context, nodes []string, run policy.UpgradeRun, dryRun cmdutil.DryRunStrategy) error {
	for _, name := range nodes {
		node, err := u.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		from := policy.UpgradeState(node.Annotations[policy.AnnotationUpgradeState])
		if err := policy.CheckUpgradeTransition(from, policy.UpgradeRequired); err != nil {
			return policy.Violationf("U4", "node %q is already in a driver upgrade (state %s, target %s): finish it with `kubectl litepool upgrade resume` or stop it with `kubectl litepool upgrade abort` first",
				name, from, node.Annotations[policy.AnnotationUpgradeTarget])
		}
	}
	if dryRun == cmdutil.DryRunClient {
		return nil
	}
	for _, name := range nodes {
		ann := map[string]*string{
			policy.AnnotationUpgradeState:   ptr.To(string(policy.UpgradeRequired)),
			policy.AnnotationUpgradeTarget:  ptr.To(run.Target),
			policy.AnnotationUpgradeRun:     ptr.To(run.Encode()),
			policy.AnnotationUpgradeMessage: ptr.To("waiting for its wave"),
		}
		if err := u.patchAnnotations(ctx, name, ann, dryRun); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot is the rollout's nodes as the cluster has them now.
type Snapshot struct {
	Nodes  []policy.UpgradeNode
	ByName map[string]*corev1.Node
}

// Snapshot reads the scope of a rollout: every node of its pool (they all count for
// max-unavailable), or just its nodes for a node rollout. Only nodes carrying this
// rollout's id have a state.
func (u *Upgrader) Snapshot(ctx context.Context, run policy.UpgradeRun, nodeNames []string) (*Snapshot, error) {
	var nodes []corev1.Node
	if run.Pool != "" {
		list, err := u.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: run.Pool}.String()})
		if err != nil {
			return nil, err
		}
		nodes = list.Items
	} else {
		for _, n := range nodeNames {
			node, err := u.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, *node)
		}
	}
	busy, err := u.busyNodes(ctx)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{ByName: map[string]*corev1.Node{}}
	for i := range nodes {
		n := &nodes[i]
		s.ByName[n.Name] = n
		un := policy.UpgradeNode{Name: n.Name, Ready: policy.IsNodeReady(n), Unavailable: n.Spec.Unschedulable, Busy: busy[n.Name]}
		if RunID(n) == run.ID {
			un.State = policy.UpgradeState(n.Annotations[policy.AnnotationUpgradeState])
		}
		s.Nodes = append(s.Nodes, un)
	}
	return s, nil
}

// RunID is the id of the rollout a node is marked for, or "".
func RunID(n *corev1.Node) string {
	r, err := policy.DecodeUpgradeRun(n.Annotations[policy.AnnotationUpgradeRun])
	if err != nil {
		return ""
	}
	return r.ID
}

func (u *Upgrader) busyNodes(ctx context.Context) (map[string]bool, error) {
	pods, err := u.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!=",
	})
	if err != nil {
		return nil, err
	}
	busy := map[string]bool{}
	for i := range pods.Items {
		if inventory.IsWorkloadPod(&pods.Items[i]) && !isInstaller(&pods.Items[i]) {
			busy[pods.Items[i].Spec.NodeName] = true
		}
	}
	return busy, nil
}

func isInstaller(p *corev1.Pod) bool {
	return p.Labels[LabelManagedBy] == ManagedBy && p.Labels[LabelComponent] == Component
}

// Rollout runs a rollout to its end from the cluster's state: waves of nodes upgraded in
// parallel, each wave waiting for the last; it stops at the first failure. nodeNames is
// the scope of a node rollout (run.Pool empty).
func (u *Upgrader) Rollout(ctx context.Context, run policy.UpgradeRun, nodeNames []string) error {
	wave := 0
	for {
		snap, err := u.Snapshot(ctx, run, nodeNames)
		if err != nil {
			return err
		}
		maxU := 1
		if run.MaxUnavailable != "" {
			v, err := policy.ParseMaxUnavailable(run.MaxUnavailable)
			if err != nil {
				return err
			}
			maxU = policy.MaxUnavailableNodes(v, len(snap.Nodes))
		}
		plan := policy.PlanUpgradeWave(snap.Nodes, maxU, run.Canary)
		if len(plan.Failed) > 0 {
			var msgs []string
			for _, n := range plan.Failed {
				msgs = append(msgs, fmt.Sprintf("node %s: %s", n, snap.ByName[n].Annotations[policy.AnnotationUpgradeMessage]))
			}
			return fmt.Errorf("%w: rollout %s stopped, %d/%d done; failed %s; the failed node stays cordoned: fix it, then `kubectl litepool upgrade resume %s --retry-failed`",
				ErrFailed, run.ID, plan.Done, plan.Total, strings.Join(msgs, "; "), scopeFlag(run, nodeNames))
		}
		if plan.Stalled() {
			return policy.Violationf("U2", "rollout %s cannot start more nodes: max-unavailable %d is taken by %d unavailable node(s) of the pool (%s); %d/%d done; bring them back or raise it: `kubectl litepool upgrade resume %s --max-unavailable N`",
				run.ID, maxU, len(plan.Unavailable), strings.Join(plan.Unavailable, ", "), plan.Done, plan.Total, scopeFlag(run, nodeNames))
		}
		if plan.Finished() {
			if len(plan.Waiting) > 0 {
				u.say("rollout %s: %d/%d nodes at %s; %d waiting: %s (NotReady: %s); run `kubectl litepool upgrade resume %s` when they are Ready",
					run.ID, plan.Done, plan.Total, run.Target, len(plan.Waiting), strings.Join(plan.Waiting, ", "), strings.Join(plan.NotReady, ", "), scopeFlag(run, nodeNames))
				return nil
			}
			u.say("rollout %s: %d/%d nodes at %s", run.ID, plan.Done, plan.Total, run.Target)
			return nil
		}
		wave++
		nodes := append(append([]string{}, plan.Continue...), plan.Start...)
		what := "wave"
		if run.Canary != "" && len(nodes) == 1 && nodes[0] == run.Canary {
			what = "canary"
		}
		u.say("%s %d: %s (max unavailable %d; %d/%d done)", what, wave, strings.Join(nodes, ", "), maxU, plan.Done, plan.Total)
		if err := u.runWave(ctx, run, nodes); err != nil {
			return err
		}
	}
}

func scopeFlag(run policy.UpgradeRun, nodes []string) string {
	if run.Pool != "" {
		return "--pool " + run.Pool
	}
	return "--node " + strings.Join(nodes, ",")
}

func (u *Upgrader) runWave(ctx context.Context, run policy.UpgradeRun, nodes []string) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = u.UpgradeNode(ctx, run, n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// UpgradeNode takes one node from its current state to done (or failed).
func (u *Upgrader) UpgradeNode(ctx context.Context, run policy.UpgradeRun, name string) error {
	for {
		node, err := u.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if RunID(node) != run.ID {
			u.say("node/%s: no longer in rollout %s (aborted or re-marked): skipped", name, run.ID)
			return nil
		}
		state := policy.UpgradeState(node.Annotations[policy.AnnotationUpgradeState])
		switch state {
		case policy.UpgradeDone:
			return nil
		case policy.UpgradeFailed:
			return fmt.Errorf("%w: node %s: %s", ErrFailed, name, node.Annotations[policy.AnnotationUpgradeMessage])
		}
		msg, err := u.step(ctx, run, node, state)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err() // interrupted, not failed: resume continues from this state
			}
			return u.fail(ctx, node, state, err)
		}
		next, ok := policy.NextUpgradeState(state)
		if !ok {
			return policy.Violationf("U1", "node %s is in unknown upgrade state %q", name, state)
		}
		if err := u.advance(ctx, node, state, next, msg); err != nil {
			return err
		}
		u.say("node/%s: %s → %s%s", name, state, next, prefixed(msg))
		reason := "DriverUpgrade"
		if next == policy.UpgradeDone {
			reason = "DriverUpgraded"
		}
		_ = u.Recorder.Normal(ctx, events.NodeRef(node), reason, "driver upgrade to %s: %s done, next %s%s", run.Target, state, next, prefixed(msg))
	}
}

func prefixed(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// step performs the work of one state; it is idempotent, so a rollout interrupted in
// the middle of a step repeats it safely.
func (u *Upgrader) step(ctx context.Context, run policy.UpgradeRun, node *corev1.Node, state policy.UpgradeState) (string, error) {
	waitT, drainT, installT, validateT, err := run.Durations()
	if err != nil {
		return "", err
	}
	switch state {
	case policy.UpgradeRequired:
		return "", nil
	case policy.UpgradeCordon:
		_, err := nodeops.Cordon(ctx, u.Kube, policy.CordonUpgrade, node.Name, cmdutil.DryRunNone)
		return "", err
	case policy.UpgradeWaitJobs:
		return u.waitForJobs(ctx, node.Name, run.WaitSelector, waitT)
	case policy.UpgradeDrain:
		return "", nodeops.Drain(ctx, u.Kube, node.Name, nodeops.DrainOptions{
			Timeout: drainT, GracePeriodSeconds: -1, IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: run.ForceDrain,
		})
	case policy.UpgradeInstall:
		return u.install(ctx, run, node.Name, installT)
	case policy.UpgradeValidate:
		return u.validate(ctx, run, node.Name, validateT)
	case policy.UpgradeUncordon:
		if !policy.HoldsCordon(policy.CordonUpgrade, node) {
			// Uncordon drops the upgrade's memory in the same update that makes the
			// node schedulable: without it, uncordon already happened before an
			// interruption.
			return "", nil
		}
		stayed, heldBy, err := nodeops.Uncordon(ctx, u.Kube, policy.CordonUpgrade, node.Name, cmdutil.DryRunNone)
		switch {
		case len(heldBy) > 0:
			return "stays cordoned: still held by litepool's " + strings.Join(heldBy, ", "), err
		case stayed:
			return "stays cordoned: it was cordoned before the upgrade", err
		}
		return "", err
	}
	return "", policy.Violationf("U1", "unknown upgrade state %q", state)
}

// waitForJobs waits for the node's workload pods (matching selector) to finish. After the
// timeout the drain evicts what is left, as NVIDIA's upgrade library does; 0 skips the wait.
func (u *Upgrader) waitForJobs(ctx context.Context, node, selector string, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		return "", nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return "", fmt.Errorf("invalid wait selector %q: %w", selector, err)
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, u.poll(), timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := u.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(), LabelSelector: sel.String(),
		})
		if err != nil {
			return false, err
		}
		left = nil
		for i := range pods.Items {
			if inventory.IsWorkloadPod(&pods.Items[i]) && !isInstaller(&pods.Items[i]) {
				left = append(left, pods.Items[i].Namespace+"/"+pods.Items[i].Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil && ctx.Err() == nil && len(left) > 0 {
		return fmt.Sprintf("%d workload pod(s) still running after %s (%s): the drain evicts them", len(left), timeout, strings.Join(left, ", ")), nil
	}
	return "", err
}

// InstallerJobName is the installer Job of a node in one rollout: the same for the same
// rollout, so a resumed rollout finds the Job it started, and another for every other
// rollout (its id carries its start time and target), so a new rollout never takes a
// finished Job of an earlier one for its own.
func InstallerJobName(run policy.UpgradeRun, node string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node + "\x00" + run.Target + "\x00" + run.ID))
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(node), "-"), "-")
	if len(base) > 38 { // the Job name goes into its pods' job-name label: at most 63
		base = strings.TrimRight(base[:38], "-")
	}
	return fmt.Sprintf("litepool-driver-%s-%08x", base, h.Sum32())
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// InstallerJob is the Job that installs a driver on one node: pinned to it by nodeName
// (the node is cordoned, so the scheduler would not place it), tolerating every taint,
// privileged with the host's root at /host, told the target in DRIVER_VERSION.
func InstallerJob(run policy.UpgradeRun, node string, timeout time.Duration) *batchv1.Job {
	backoff := int32(0)
	privileged := true
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: InstallerJobName(run, node), Namespace: run.Namespace,
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelComponent: Component},
			Annotations: map[string]string{AnnotationJobNode: node, policy.AnnotationUpgradeTarget: run.Target,
				AnnotationJobRollout: run.ID},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelComponent: Component},
					Annotations: map[string]string{AnnotationJobNode: node},
				},
				Spec: corev1.PodSpec{
					NodeName:      node,
					RestartPolicy: corev1.RestartPolicyNever,
					HostPID:       true,
					Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "installer", Image: run.InstallerImage, Command: run.InstallerCommand,
						Env: []corev1.EnvVar{
							{Name: "DRIVER_VERSION", Value: run.Target},
							{Name: "NODE_NAME", Value: node},
							{Name: "HOST_ROOT", Value: "/host"},
						},
						SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
						VolumeMounts:    []corev1.VolumeMount{{Name: "host", MountPath: "/host"}},
					}},
					Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
				},
			},
		},
	}
	if timeout > 0 {
		secs := int64(timeout.Seconds())
		job.Spec.ActiveDeadlineSeconds = &secs
	}
	return job
}

func (u *Upgrader) install(ctx context.Context, run policy.UpgradeRun, node string, timeout time.Duration) (string, error) {
	jobs := u.Kube.BatchV1().Jobs(run.Namespace)
	want := InstallerJob(run, node, timeout)
	job, err := jobs.Get(ctx, want.Name, metav1.GetOptions{})
	if err == nil && job.Annotations[AnnotationJobRollout] != run.ID {
		// Not this rollout's (made before Jobs were named per rollout): never reuse
		// its result; replace it.
		if err = u.deleteJob(ctx, run.Namespace, want.Name); err == nil {
			err = apierrors.NewNotFound(batchv1.Resource("jobs"), want.Name)
		}
	}
	if apierrors.IsNotFound(err) {
		job, err = jobs.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			u.say("node/%s: installer job %s/%s created (image %s)", node, run.Namespace, job.Name, run.InstallerImage)
		}
	}
	if err != nil {
		return "", fmt.Errorf("installer job %s/%s: %w", run.Namespace, want.Name, err)
	}
	if timeout <= 0 {
		timeout = 24 * time.Hour
	}
	var done, failed string
	err = wait.PollUntilContextTimeout(ctx, u.poll(), timeout, true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				done = "installer job " + j.Name + " completed"
				return true, nil
			case batchv1.JobFailed:
				failed = fmt.Sprintf("installer job %s/%s failed: %s %s", j.Namespace, j.Name, c.Reason, c.Message)
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case failed != "":
		return "", errors.New(failed)
	case err != nil && ctx.Err() == nil:
		return "", fmt.Errorf("installer job %s/%s did not complete within %s", run.Namespace, want.Name, timeout)
	}
	return done, err
}

func (u *Upgrader) validate(ctx context.Context, run policy.UpgradeRun, node string, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = 24 * time.Hour
	}
	var seen string
	err := wait.PollUntilContextTimeout(ctx, u.poll(), timeout, true, func(ctx context.Context) (bool, error) {
		n, err := u.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		seen = policy.DriverVersion(n)
		return seen == run.Target, nil
	})
	if err != nil && ctx.Err() == nil {
		return "", fmt.Errorf("validation timed out after %s: the node's driver-version label reads %q, want %q (labels %s)",
			timeout, seen, run.Target, strings.Join(policy.DriverVersionLabels, ", "))
	}
	if err != nil {
		return "", err
	}
	return "driver-version label reads " + seen, nil
}

// fail marks the node failed; it stays cordoned for an operator to look at.
func (u *Upgrader) fail(ctx context.Context, node *corev1.Node, state policy.UpgradeState, cause error) error {
	ctx = context.WithoutCancel(ctx)
	msg := fmt.Sprintf("failed in %s: %v", state, cause)
	if err := u.advance(ctx, node, state, policy.UpgradeFailed, msg); err != nil {
		return errors.Join(cause, err)
	}
	u.say("node/%s: %s → failed: %v", node.Name, state, cause)
	_ = u.Recorder.Warning(ctx, events.NodeRef(node), "DriverUpgradeFailed", "driver upgrade to %s %s; the node stays cordoned",
		node.Annotations[policy.AnnotationUpgradeTarget], msg)
	return fmt.Errorf("%w: node %s %s", ErrFailed, node.Name, msg)
}

// advance moves a node from one state to the next with a JSON patch that first tests
// the current state: two plugins working on one rollout can never both take a step.
func (u *Upgrader) advance(ctx context.Context, node *corev1.Node, from, to policy.UpgradeState, msg string) error {
	if err := policy.CheckUpgradeTransition(from, to); err != nil {
		return err
	}
	path := "/metadata/annotations/"
	esc := func(k string) string { return path + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1") }
	ops := []map[string]any{
		{"op": "test", "path": esc(policy.AnnotationUpgradeState), "value": string(from)},
		{"op": "replace", "path": esc(policy.AnnotationUpgradeState), "value": string(to)},
		{"op": "add", "path": esc(policy.AnnotationUpgradeMessage), "value": msg},
	}
	data, _ := json.Marshal(ops)
	_, err := u.Kube.CoreV1().Nodes().Patch(ctx, node.Name, types.JSONPatchType, data, metav1.PatchOptions{})
	if err == nil {
		return nil
	}
	if cur, gerr := u.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); gerr == nil &&
		cur.Annotations[policy.AnnotationUpgradeState] != string(from) {
		return policy.Violationf("U1", "node %s left state %s for %q while this plugin worked on it (another `upgrade resume` or `abort`?)",
			node.Name, from, cur.Annotations[policy.AnnotationUpgradeState])
	}
	return err
}

func (u *Upgrader) patchAnnotations(ctx context.Context, node string, ann map[string]*string, dryRun cmdutil.DryRunStrategy) error {
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	opts := metav1.PatchOptions{DryRun: nodeops.ServerDryRun(dryRun)}
	_, err := u.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, opts)
	return err
}

// Unmark removes a node from its rollout (abort of a node that has not started).
func (u *Upgrader) Unmark(ctx context.Context, node string, dryRun cmdutil.DryRunStrategy) error {
	if dryRun == cmdutil.DryRunClient {
		return nil
	}
	return u.patchAnnotations(ctx, node, map[string]*string{
		policy.AnnotationUpgradeState: nil, policy.AnnotationUpgradeTarget: nil,
		policy.AnnotationUpgradeRun: nil, policy.AnnotationUpgradeMessage: nil,
	}, dryRun)
}

// Retry re-marks a failed node upgrade-required and deletes its installer Job, so that
// the next attempt runs the installer afresh (rule U1: failed → upgrade-required).
func (u *Upgrader) Retry(ctx context.Context, run policy.UpgradeRun, node *corev1.Node) error {
	if err := u.deleteJob(ctx, run.Namespace, InstallerJobName(run, node.Name)); err != nil {
		return err
	}
	return u.advance(ctx, node, policy.UpgradeFailed, policy.UpgradeRequired, "retrying after failure")
}

// deleteJob deletes an installer Job and waits until it is gone: a new one of the same
// name may be created next.
func (u *Upgrader) deleteJob(ctx context.Context, namespace, name string) error {
	bg := metav1.DeletePropagationBackground
	err := u.Kube.BatchV1().Jobs(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, u.poll(), 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := u.Kube.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
