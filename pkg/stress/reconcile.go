package stress

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/pass"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Conditions of a StressRun.
const (
	ConditionStarted  = "Started"
	ConditionComplete = "Complete"
)

// PoolBusyRecheck is how soon a run waiting for its pool is looked at again when
// nothing wakes it: the controller wakes it when a run of its pool ends, is aborted or
// is deleted, so this only bounds what a missed event costs.
const PoolBusyRecheck = 5 * time.Minute

// runningRecheck is how often a running run is looked at even when no pod changed: its
// pods' deadlines are judged by the clock.
const runningRecheck = 30 * time.Second

// Reconciler moves one StressRun a step closer to its end each time it is called, from
// what the cluster holds now (level-triggered): it never waits and starts nothing in
// the background, so the controller's manager and the plugin's loop can both drive it.
type Reconciler struct {
	// Client reads StressRuns and writes their status.
	Client client.Client
	// Live lists the runs of a pool when one is about to start: uncached, so that a run
	// that just started is seen.
	Live client.Reader
	// Pods reads the test pods in Namespace.
	Pods client.Reader
	// Kube creates and deletes test pods, reads nodes and workload pods, labels nodes.
	Kube     kubernetes.Interface
	Recorder *events.Recorder
	// Namespace is litepool's own: the only one test pods are created in.
	Namespace string
	// Accelerators says which resources a test pod holds; the zero value is the known set.
	Accelerators policy.Accelerators
	Clock        clock.PassiveClock
	// StandIn: this reconciler runs in the plugin because no controller took the run. It
	// leaves status.observedGeneration alone: that field is a controller's answer that it
	// acts on the spec, and a later command must not take a dead plugin's pass for a
	// controller (as upgrade.Reconciler.StandIn).
	StandIn bool
}

// Reconcile takes the run req names one step on (pass.Pass): start it (one run per
// pool), create the next pod of each node, read finished pods, judge nodes; then, once
// that status is stored, label the judged nodes and clean up. It asks to be called
// again when its pods' deadlines want a look (else when something changes).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := pass.Pass[*v1alpha1.StressRun]{Client: r.Client, New: func() *v1alpha1.StressRun { return &v1alpha1.StressRun{} }, Decide: r.decide}
	return p.Reconcile(ctx, req)
}

// decide sets run's status to its next step and says what is owed once it is stored:
// the labels of the nodes judged and not yet recorded, and the pods whose results
// are stored and not to be kept.
func (r *Reconciler) decide(ctx context.Context, run *v1alpha1.StressRun) (pass.Decision, error) {
	st := &run.Status
	if !r.StandIn {
		st.ObservedGeneration = run.Generation
	}
	if st.Phase == "" {
		st.Phase = v1alpha1.StressRunPending
	}
	if st.Namespace == "" {
		st.Namespace = r.Namespace
	}
	var d pass.Decision
	var err error
	switch {
	case st.Phase.Finished():
	case run.Spec.Abort:
		err = r.abort(ctx, run, st, "Aborted", "spec.abort is set")
	case st.Phase == v1alpha1.StressRunPending:
		d.Requeue, err = r.start(ctx, run, st)
	default:
		d.Requeue, err = r.step(ctx, run, st)
	}
	if err != nil {
		return d, err
	}
	d.Effects, d.Paid = r.owed(run)
	d.Effects = append(d.Effects, func(ctx context.Context) error { return r.cleanUp(ctx, run) })
	if st.Phase.Finished() {
		d.Requeue = 0
	}
	return d, nil
}

// owed are the judged nodes whose label, annotation and Event are not recorded yet,
// each an effect, and the mark that records them.
func (r *Reconciler) owed(run *v1alpha1.StressRun) ([]pass.Effect, func()) {
	var effects []pass.Effect
	var owed []int
	for i, j := range run.Status.Judged {
		if j.Recorded {
			continue
		}
		owed = append(owed, i)
		effects = append(effects, func(ctx context.Context) error {
			return RecordNode(ctx, r.Kube, r.Recorder, j.Node, run.Name, j.Summary, j.Health == policy.HealthDegraded)
		})
	}
	return effects, func() {
		for _, i := range owed {
			run.Status.Judged[i].Recorded = true
		}
	}
}

func (r *Reconciler) now() metav1.Time {
	if r.Clock == nil {
		return metav1.Now()
	}
	return metav1.NewTime(r.Clock.Now())
}

func setCondition(st *v1alpha1.StressRunStatus, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// start: one run per pool at a time. The runs of the pool are read live; this one
// starts when no other is Running and none Pending was created before it (by creation
// time, then name). Then it plans the nodes and records the plan, with Running, in an
// update of this run's status: a concurrent writer makes it fail and the next call
// judges again.
func (r *Reconciler) start(ctx context.Context, run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus) (time.Duration, error) {
	tests := make([]string, 0, len(run.Spec.Tests))
	for _, t := range run.Spec.Tests {
		tests = append(tests, string(t))
	}
	if err := policy.CheckStressTests(tests); err != nil {
		r.finish(run, st, v1alpha1.StressRunFailed, "InvalidSpec", err.Error())
		return 0, nil
	}
	if holder, err := r.holder(ctx, run); err != nil {
		return 0, err
	} else if holder != "" {
		setCondition(st, run.Generation, ConditionStarted, metav1.ConditionFalse, "PoolBusy",
			fmt.Sprintf("stress run %s holds pool %s: this one starts when it ends", holder, run.Spec.Pool))
		return PoolBusyRecheck, nil
	}
	targets, domains, err := r.plan(ctx, run)
	if err != nil {
		if apierrors.ReasonForError(err) != metav1.StatusReasonUnknown {
			return 0, err
		}
		reason := "NoNodes"
		if len(policy.Rules(err)) > 0 {
			reason = "NoDomains" // T4: the pool lost its topology, or its domains, since
		}
		r.finish(run, st, v1alpha1.StressRunFailed, reason, err.Error())
		return 0, nil
	}
	st.Results, st.Domains = nil, domains
	for _, t := range targets {
		if t.Skip != "" {
			st.Results = append(st.Results, v1alpha1.StressNodeResult{Node: t.Node, Outcome: v1alpha1.StressOutcomeSkipped, Message: t.Skip})
			continue
		}
		for _, test := range run.Spec.Tests {
			st.Results = append(st.Results, v1alpha1.StressNodeResult{Node: t.Node, Test: test, Outcome: v1alpha1.StressOutcomePending})
		}
	}
	now := r.now()
	st.Phase, st.StartTime = v1alpha1.StressRunRunning, &now
	setCondition(st, run.Generation, ConditionStarted, metav1.ConditionTrue, "Started",
		fmt.Sprintf("testing %d node(s)%s of pool %s in namespace %s", countNodes(st.Results, false), inDomains(st), run.Spec.Pool, r.Namespace))
	count(st)
	if countNodes(st.Results, false) == 0 {
		r.finish(run, st, v1alpha1.StressRunSucceeded, "NothingToTest", "every node was skipped")
	}
	return time.Millisecond, nil // go on at once: the next call creates the pods
}

// plan is what a run starts with: its targets, and its domains when it runs by domain
// (read from the Pool live, as the nodes are: a run starts from what is true now).
func (r *Reconciler) plan(ctx context.Context, run *v1alpha1.StressRun) ([]Target, []v1alpha1.StressDomainResult, error) {
	if !run.Spec.Domains {
		targets, err := Plan(ctx, r.Kube, r.Namespace, run.Spec.Pool, run.Spec.Nodes)
		return targets, nil, err
	}
	pool := &v1alpha1.Pool{}
	if err := r.Live.Get(ctx, client.ObjectKey{Name: run.Spec.Pool}, pool); apierrors.IsNotFound(err) {
		pool = nil
	} else if err != nil {
		return nil, nil, err
	}
	return PlanDomains(ctx, r.Kube, r.Namespace, pool, run.Spec.Pool)
}

// inDomains says, for the Started condition, how many domains a run by domain tests.
func inDomains(st *v1alpha1.StressRunStatus) string {
	if st.Domains == nil {
		return ""
	}
	return fmt.Sprintf(" in %d domain(s)", len(domainsTested(st)))
}

// holder is the run that keeps run from starting, if any.
func (r *Reconciler) holder(ctx context.Context, run *v1alpha1.StressRun) (string, error) {
	var list v1alpha1.StressRunList
	if err := r.Live.List(ctx, &list); err != nil {
		return "", err
	}
	var first *v1alpha1.StressRun
	for i := range list.Items {
		o := &list.Items[i]
		if o.Spec.Pool != run.Spec.Pool || o.Name == run.Name || o.Status.Phase.Finished() || o.Spec.Abort {
			continue
		}
		if o.Status.Phase == v1alpha1.StressRunRunning {
			return o.Name, nil
		}
		if before(o, run) && (first == nil || before(o, first)) {
			first = o
		}
	}
	if first != nil {
		return first.Name, nil
	}
	return "", nil
}

func before(a, b *v1alpha1.StressRun) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// step moves every node on: the first unfinished test of each node gets its pod, or
// its pod's end is read (a failure ends the node's run), or its deadline is judged.
// A node whose tests are all final is judged; when every node is, the run ends.
func (r *Reconciler) step(ctx context.Context, run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus) (time.Duration, error) {
	requeue := runningRecheck
	// By domain, a second round starts together what the first gated: the member
	// stepped first saw its peers' test still running, read only later in the round.
	rounds := 1
	if run.Spec.Domains {
		rounds = 2
	}
	for range rounds {
		stopFailedDomains(st)
		for _, node := range nodesOf(st.Results) {
			idx := indexesOf(st.Results, node)
			after, err := r.stepNode(ctx, run, st, node, idx)
			if err != nil || after < 0 {
				return 0, err
			}
			if after > 0 && after < requeue {
				requeue = after
			}
		}
	}
	if run.Spec.Domains {
		// A member that failed in this pass stops its domain now, not a recheck later.
		stopFailedDomains(st)
		if err := r.judgeDone(run, st); err != nil {
			return 0, err
		}
		tallyDomains(st)
	}
	count(st)
	if allFinal(st.Results) {
		phase, reason, msg := v1alpha1.StressRunSucceeded, "Passed", fmt.Sprintf("%d node(s) passed", st.Passed)
		if st.Failed > 0 {
			phase, reason, msg = v1alpha1.StressRunFailed, "NodesFailed", fmt.Sprintf("%d node(s) failed: %s", st.Failed, strings.Join(failedNodes(st.Results), ", "))
			if failed := FailedDomains(st); len(failed) > 0 {
				msg += fmt.Sprintf("; %d domain(s) failed: %s", len(failed), strings.Join(failed, ", "))
			}
		}
		r.finish(run, st, phase, reason, msg)
		return 0, nil
	}
	return requeue, nil
}

// stepNode moves one node on as far as it can now: a test that passed is followed at
// once by the next one's pod. It returns how soon the node's deadline wants a look
// (0: none), or -1 when the run was ended.
func (r *Reconciler) stepNode(ctx context.Context, run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus, node string, idx []int) (time.Duration, error) {
	for {
		next := -1
		for _, i := range idx {
			if !st.Results[i].Outcome.Final() {
				next = i
				break
			}
		}
		if next < 0 {
			return 0, nil
		}
		res := &st.Results[next]
		switch res.Outcome {
		case v1alpha1.StressOutcomePending:
			if !mayStart(run, st, res) {
				return 0, nil // its domain's members have not all ended the test before
			}
			if err := r.createPod(ctx, run, res); err != nil {
				if isPermanent(err) {
					return -1, r.abort(ctx, run, st, "CannotCreatePods", fmt.Sprintf("creating the test pod of node %s in namespace %s: %v", node, r.Namespace, err))
				}
				return 0, err
			}
			return r.deadline(run, res), nil
		case v1alpha1.StressOutcomeRunning:
			var pod corev1.Pod
			err := r.Pods.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: res.Pod}, &pod)
			switch {
			case apierrors.IsNotFound(err):
				// Not in the cache yet, or deleted by someone: create it again (its
				// name is fixed, so a pod that exists is found, never doubled).
				if err := r.createPod(ctx, run, res); err != nil && !isPermanent(err) {
					return 0, err
				}
				return r.deadline(run, res), nil
			case err != nil:
				return 0, err
			}
			outcome, code, msg := PodOutcome(&pod)
			now := r.now()
			if outcome.Final() {
				res.Outcome, res.ExitCode, res.Message, res.FinishTime = outcome, code, msg, &now
			} else if left := r.deadline(run, res); left > 0 {
				return left, nil
			} else {
				res.Outcome, res.Message, res.FinishTime = v1alpha1.StressOutcomeFailed, fmt.Sprintf("did not finish within %s", Timeout(run)), &now
			}
		}
		if res.Outcome == v1alpha1.StressOutcomeFailed {
			for _, i := range idx {
				if !st.Results[i].Outcome.Final() {
					st.Results[i].Outcome, st.Results[i].Message = v1alpha1.StressOutcomeNotRun, fmt.Sprintf("test %s failed first", res.Test)
				}
			}
		}
		if nodeDone(st.Results, idx) {
			return 0, r.judge(run, st, node, idx)
		}
	}
}

// deadline is how long the running test of res has left, by the run's clock: pods
// carry activeDeadlineSeconds too, but a node without a kubelet to enforce it must
// not hold the run for ever.
func (r *Reconciler) deadline(run *v1alpha1.StressRun, res *v1alpha1.StressNodeResult) time.Duration {
	if res.StartTime == nil {
		return Timeout(run)
	}
	return res.StartTime.Add(Timeout(run)).Sub(r.now().Time)
}

func (r *Reconciler) createPod(ctx context.Context, run *v1alpha1.StressRun, res *v1alpha1.StressNodeResult) error {
	node, err := r.Kube.CoreV1().Nodes().Get(ctx, res.Node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	runner := &nodejob.Runner{Kube: r.Kube, Namespace: r.Namespace}
	pod, err := runner.EnsurePod(ctx, TestSpec(run, node, string(res.Test), r.Accelerators))
	if err != nil {
		return err
	}
	if res.Outcome == v1alpha1.StressOutcomePending {
		now := r.now()
		res.Outcome, res.Pod, res.StartTime = v1alpha1.StressOutcomeRunning, pod.Name, &now
	}
	return nil
}

// isPermanent: an error that trying again does not cure (the namespace is missing,
// the pod is refused).
func isPermanent(err error) bool {
	var foreign *nodejob.ForeignError
	return errors.As(err, &foreign) || nodejob.IsNotApproved(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

func (r *Reconciler) deletePod(ctx context.Context, name string) error {
	err := r.Kube.CoreV1().Pods(r.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// cleanUp deletes the pods whose result is stored and not to be kept: passed tests
// (unless keepPods), aborted ones, and failed ones still running (judged by the clock).
// A failed test's ended pod stays for its logs. It runs once the status is stored
// (an effect), on what it holds: a pod is never deleted before its result is stored,
// so a pass whose write is lost has killed no test that its retry would run again.
func (r *Reconciler) cleanUp(ctx context.Context, run *v1alpha1.StressRun) error {
	for _, res := range run.Status.Results {
		drop := res.Outcome == v1alpha1.StressOutcomeAborted || res.Outcome == v1alpha1.StressOutcomePassed && !run.Spec.KeepPods
		if res.Pod == "" || !drop && res.Outcome != v1alpha1.StressOutcomeFailed {
			continue
		}
		var pod corev1.Pod
		err := r.Pods.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: res.Pod}, &pod)
		if apierrors.IsNotFound(err) || err == nil && pod.DeletionTimestamp != nil {
			continue
		}
		if err != nil {
			return err
		}
		if !drop && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
			continue
		}
		if err := r.deletePod(ctx, res.Pod); err != nil {
			return err
		}
	}
	return nil
}

// abort ends the run: tests not final are Aborted (their pods deleted once that is
// stored); nodes are not judged on them.
func (r *Reconciler) abort(ctx context.Context, run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus, reason, msg string) error {
	for i := range st.Results {
		if !st.Results[i].Outcome.Final() {
			st.Results[i].Outcome, st.Results[i].Message = v1alpha1.StressOutcomeAborted, msg
		}
	}
	count(st)
	tallyDomains(st)
	phase := v1alpha1.StressRunAborted
	if reason != "Aborted" {
		phase = v1alpha1.StressRunFailed
	}
	r.finish(run, st, phase, reason, msg)
	return nil
}

func (r *Reconciler) finish(run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus, phase v1alpha1.StressRunPhase, reason, msg string) {
	now := r.now()
	st.Phase, st.CompletionTime = phase, &now
	if meta.FindStatusCondition(st.Conditions, ConditionStarted) == nil {
		setCondition(st, run.Generation, ConditionStarted, metav1.ConditionFalse, reason, msg)
	}
	setCondition(st, run.Generation, ConditionComplete, metav1.ConditionTrue, reason, msg)
}

// judge records the verdict of a node whose tests are all final: degraded when one
// failed, healthy when all passed; a node with an aborted test is not judged, nor one
// whose tests did not all run for another member's failure (a run by domain). The
// node is labelled once the verdict is stored (owed).
func (r *Reconciler) judge(run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus, node string, idx []int) error {
	var tests []string
	failed, notRun, detail := false, false, "exit 0"
	for _, i := range idx {
		res := st.Results[i]
		tests = append(tests, string(res.Test))
		switch res.Outcome {
		case v1alpha1.StressOutcomeAborted, v1alpha1.StressOutcomeSkipped:
			return nil
		case v1alpha1.StressOutcomeNotRun:
			notRun = true
		case v1alpha1.StressOutcomeFailed:
			failed, detail = true, string(res.Test)+": "+res.Message
		}
	}
	if notRun && !failed {
		return nil
	}
	for _, j := range st.Judged {
		if j.Node == node {
			return nil
		}
	}
	result, health := "passed", policy.HealthHealthy
	if failed {
		result, health = "failed", policy.HealthDegraded
	}
	summary := fmt.Sprintf("%s %s at %s %s: %s", strings.Join(tests, ","), result, r.now().UTC().Format(time.RFC3339), RunMark(run.Name), detail)
	st.Judged = append(st.Judged, v1alpha1.StressJudgement{Node: node, Health: health, Summary: summary})
	return nil
}

// judgeDone judges every node whose tests are all final (judge records a node once).
func (r *Reconciler) judgeDone(run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus) error {
	for _, node := range nodesOf(st.Results) {
		if idx := indexesOf(st.Results, node); nodeDone(st.Results, idx) {
			if err := r.judge(run, st, node, idx); err != nil {
				return err
			}
		}
	}
	return nil
}

// count fills the node counts.
func count(st *v1alpha1.StressRunStatus) {
	st.Total, st.Passed, st.Failed, st.Skipped = 0, 0, 0, 0
	for _, node := range nodesOf(st.Results) {
		idx := indexesOf(st.Results, node)
		first := st.Results[idx[0]]
		if first.Outcome == v1alpha1.StressOutcomeSkipped {
			st.Skipped++
			continue
		}
		st.Total++
		passed, failed := true, false
		for _, i := range idx {
			passed = passed && st.Results[i].Outcome == v1alpha1.StressOutcomePassed
			failed = failed || st.Results[i].Outcome == v1alpha1.StressOutcomeFailed
		}
		switch {
		case failed:
			st.Failed++
		case passed:
			st.Passed++
		}
	}
}

func nodesOf(rs []v1alpha1.StressNodeResult) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !seen[r.Node] {
			seen[r.Node] = true
			out = append(out, r.Node)
		}
	}
	sort.Strings(out)
	return out
}

func indexesOf(rs []v1alpha1.StressNodeResult, node string) []int {
	var out []int
	for i := range rs {
		if rs[i].Node == node {
			out = append(out, i)
		}
	}
	return out
}

func nodeDone(rs []v1alpha1.StressNodeResult, idx []int) bool {
	for _, i := range idx {
		if !rs[i].Outcome.Final() {
			return false
		}
	}
	return true
}

func allFinal(rs []v1alpha1.StressNodeResult) bool {
	for _, r := range rs {
		if !r.Outcome.Final() {
			return false
		}
	}
	return true
}

// countNodes counts the nodes tested (skipped false) or skipped.
func countNodes(rs []v1alpha1.StressNodeResult, skipped bool) int {
	n := 0
	for _, node := range nodesOf(rs) {
		if (rs[indexesOf(rs, node)[0]].Outcome == v1alpha1.StressOutcomeSkipped) == skipped {
			n++
		}
	}
	return n
}

// FailedNodes are the nodes of a run that failed a test.
func FailedNodes(st *v1alpha1.StressRunStatus) []string { return failedNodes(st.Results) }

func failedNodes(rs []v1alpha1.StressNodeResult) []string {
	var out []string
	for _, node := range nodesOf(rs) {
		for _, i := range indexesOf(rs, node) {
			if rs[i].Outcome == v1alpha1.StressOutcomeFailed {
				out = append(out, node)
				break
			}
		}
	}
	return out
}

// PodsOf reads pods straight from kube: the Pods reader of a Reconciler that runs
// without a cache (the plugin's).
func PodsOf(kube kubernetes.Interface) client.Reader { return podReader{kube} }

type podReader struct{ kube kubernetes.Interface }

func (p podReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("pods only, not %T", obj)
	}
	got, err := p.kube.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	*pod = *got
	return nil
}

func (p podReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return fmt.Errorf("pods only, not %T", list)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	got, err := p.kube.CoreV1().Pods(o.Namespace).List(ctx, *o.AsListOptions())
	if err != nil {
		return err
	}
	*pods = *got
	return nil
}
