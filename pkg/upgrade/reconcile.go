package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/pass"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// ConditionComplete is a DriverRollout's condition: True once it succeeded; False with
// the phase (or Stalled, WaitingForNodes) as its reason while not.
const ConditionComplete = "Complete"

// Reasons of the Complete condition besides the phases.
const (
	// ReasonStalled: nodes wait only because maxUnavailable is taken by nodes that are
	// unavailable for other reasons; nothing running will free a slot.
	ReasonStalled = "Stalled"
	// ReasonWaitingForNodes: the nodes left are NotReady; they start once Ready.
	ReasonWaitingForNodes = "WaitingForNodes"
)

// Reconciler drives DriverRollouts, level-triggered: each call reads the rollout and
// the cluster, does the next steps of each node that can take one now (Stepper.Step,
// which never blocks), records the result in the rollout's status with optimistic
// concurrency, and asks to be called again while the rollout is under way. Two
// processes reconciling one rollout (a new leader and an old one, or the plugin and a
// controller) cannot both record a step: one status update wins, the other is
// refused and redone from the new state; and what a step makes is named
// deterministically (installer Jobs), so a step repeated makes nothing twice.
type Reconciler struct {
	// Client reads and updates DriverRollouts (the manager's cache in the controller;
	// a direct client in the plugin).
	Client client.Client
	// Kube does the steps.
	Kube kubernetes.Interface
	// Nodes, when set (the controller's cache, whose node watch wakes a rollout), is
	// where a pass first reads the nodes it counts; without it they are read live.
	Nodes client.Reader
	// Pods, when set (the controller's pod index), says which pending nodes are busy;
	// without it (the plugin's stand-in) the pods of the pending nodes are listed.
	Pods *podindex.Index
	// Queued, when set, names nodes a scheduler's queue placed admitted work on whose
	// pods are not there yet: busy too, for the idle-first order of the waves.
	Queued   Queued
	Recorder *events.Recorder
	// Namespace is litepool's own namespace: installer Jobs are made there, and nowhere
	// else.
	Namespace string
	// Jobs, when set (the controller's cache of litepool's namespace), is where
	// installer Jobs are read.
	Jobs client.Reader
	// Watched: the caller wakes a pass on every change a rollout waits for (its
	// installer Jobs, its nodes, the pods on them: the controller's watches), so a pass
	// asks to run again only when time is what it waits for (a timeout, an eviction a
	// disruption budget refused). Without it (the plugin) a rollout under way is looked
	// at again after Recheck.
	Watched bool
	// Recheck is how soon a rollout under way is looked at again when not Watched, and
	// how soon a refused eviction is asked again (default 2s).
	Recheck time.Duration
	Clock   clock.PassiveClock
	// Stand-in: this reconciler runs in the plugin because no controller acted on the
	// rollout. It leaves status.observedGeneration alone: that field is a controller's
	// answer that it acts on the spec, and a later command must not take a dead
	// plugin's pass for a controller.
	StandIn bool
	// predictPool is the rollout's Pool for Predict, which has no Client.
	predictPool *v1alpha1.Pool
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Reconciler) recheck() time.Duration {
	if r.Recheck > 0 {
		return r.Recheck
	}
	return 2 * time.Second
}

// transition is one node's move, published (node annotations, an Event) once the
// status that records it is stored.
type transition struct {
	node     string
	from, to policy.UpgradeState
	msg      string
}

type passState struct {
	now         metav1.Time
	transitions []transition
	started     []string
	maxU        int
	// byDomain: the rollout goes domain by domain (spec.maxUnavailableDomains); maxU
	// is then a count of domains and minNodes the pool's floor on available nodes.
	byDomain bool
	minNodes int
	// retry: a step waits for something only time brings (Outcome.Retry).
	retry bool
}

func (p *passState) move(n *v1alpha1.DriverRolloutNode, to policy.UpgradeState, msg string) {
	from := policy.UpgradeState(n.State)
	p.transitions = append(p.transitions, transition{node: n.Name, from: from, to: to, msg: msg})
	n.State, n.Message, n.Since = string(to), msg, p.now.DeepCopy()
	// The node is out from its cordon to its done; a failed node stays cordoned, so
	// it stays out through its retries.
	if from == policy.UpgradeRequired && policy.UpgradeStarted(to) && n.OutSince == nil {
		n.OutSince = p.now.DeepCopy()
	}
	if to == policy.UpgradeDone {
		n.OutUntil = p.now.DeepCopy()
	}
}

// Reconcile is one pass over one rollout (pass.Pass): its steps, recorded in its
// status; once that is stored, the moves are published.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := pass.Pass[*v1alpha1.DriverRollout]{Client: r.Client, New: func() *v1alpha1.DriverRollout { return &v1alpha1.DriverRollout{} }, Decide: r.decide}
	return p.Reconcile(ctx, req)
}

// decide takes the rollout's steps and says how soon to look again; an error of a step
// is returned after the status records the steps that went.
func (r *Reconciler) decide(ctx context.Context, ro *v1alpha1.DriverRollout) (pass.Decision, error) {
	if r.Namespace == "" {
		return pass.Decision{}, fmt.Errorf("no namespace for installer Jobs: litepool's own namespace is needed")
	}
	p := &passState{now: metav1.NewTime(r.now()).Rfc3339Copy()}
	d := pass.Decision{Err: r.reconcile(ctx, ro, p)}
	if !r.StandIn {
		ro.Status.ObservedGeneration = ro.Generation
	}
	if len(p.transitions) > 0 {
		d.Effects = []pass.Effect{func(ctx context.Context) error { r.publish(ctx, ro, p.transitions); return nil }}
	}
	switch {
	case !Active(ro):
	case !r.Watched || p.retry:
		d.Requeue = r.recheck()
	default:
		d.Requeue = untilTimeout(ro, p.now.Time)
	}
	return d, nil
}

// untilTimeout is how long until the first timeout of a node's present state ends (0:
// none does): the one wake-up a watched rollout needs that no object's change brings.
func untilTimeout(ro *v1alpha1.DriverRollout, now time.Time) time.Duration {
	var first time.Duration
	for _, d := range StepDeadlines(ro) {
		left := max(d.At.Sub(now), 0) + time.Second
		if first == 0 || left < first {
			first = left
		}
	}
	return first
}

// StepDeadline is when a node's present step times out: past it the reconciler fails the
// node (or, for wait-for-jobs, drains what is left).
type StepDeadline struct {
	Node  string
	State policy.UpgradeState
	At    time.Time
}

// StepDeadlines are the deadlines of the rollout's nodes in a step that has a timeout.
// The controller's metrics export them, so that an alert sees a node past its deadline
// that no reconciler moved on (docs/runbook.md).
func StepDeadlines(ro *v1alpha1.DriverRollout) []StepDeadline {
	t := TimeoutsOf(&ro.Spec)
	limit := map[policy.UpgradeState]time.Duration{policy.UpgradeWaitJobs: t.Wait, policy.UpgradeDrain: t.Drain,
		policy.UpgradeInstall: t.Install + installGrace, policy.UpgradeValidate: t.Validate}
	var out []StepDeadline
	for _, n := range ro.Status.Nodes {
		state := policy.UpgradeState(n.State)
		d, ok := limit[state]
		if !ok || d <= 0 || n.Since == nil || (state == policy.UpgradeInstall && t.Install <= 0) {
			continue
		}
		out = append(out, StepDeadline{Node: n.Name, State: state, At: n.Since.Add(d)})
	}
	return out
}

// Active says whether a rollout has work the reconciler will do without a spec change.
func Active(ro *v1alpha1.DriverRollout) bool {
	switch ro.Status.Phase {
	case "", v1alpha1.RolloutPending, v1alpha1.RolloutProgressing:
		return true
	}
	return false
}

// Final says whether a rollout can do nothing more (Succeeded, Aborted).
func Final(ro *v1alpha1.DriverRollout) bool {
	return ro.Status.Phase == v1alpha1.RolloutSucceeded || ro.Status.Phase == v1alpha1.RolloutAborted
}

func (r *Reconciler) reconcile(ctx context.Context, ro *v1alpha1.DriverRollout, p *passState) error {
	st := &ro.Status
	if Final(ro) {
		return nil
	}
	if st.Nodes == nil {
		if st.Phase == v1alpha1.RolloutFailed && ro.Spec.RetryFailed <= st.RetriedFailed {
			return nil // refused at its start; a retry tries the start again
		}
		st.RetriedFailed = ro.Spec.RetryFailed
		if why, err := r.start(ctx, ro, p); err != nil {
			return err
		} else if why != "" {
			st.Phase, st.Message = v1alpha1.RolloutFailed, why
			setComplete(ro, string(v1alpha1.RolloutFailed), why)
			return nil
		}
	}
	if ro.Spec.RetryFailed > st.RetriedFailed {
		for i := range st.Nodes {
			if n := &st.Nodes[i]; n.State == string(policy.UpgradeFailed) {
				n.Attempt++
				p.move(n, policy.UpgradeRequired, fmt.Sprintf("retrying after failure (attempt %d)", n.Attempt))
				n.Job = ""
			}
		}
		st.RetriedFailed = ro.Spec.RetryFailed
	}
	if ro.Spec.Abort {
		for i := range st.Nodes {
			if n := &st.Nodes[i]; n.State == string(policy.UpgradeRequired) {
				p.move(n, policy.UpgradeAborted, "left the rollout: aborted before it started")
			}
		}
	}
	scope, err := r.scope(ctx, ro, r.Nodes)
	if err != nil {
		return err
	}
	var stepErr error
	for i := range st.Nodes {
		if n := &st.Nodes[i]; policy.UpgradeStarted(policy.UpgradeState(n.State)) {
			if err := r.drive(ctx, ro, n, scope, p); err != nil {
				stepErr = err
			}
		}
	}
	if err := r.returnWholeDomains(ctx, ro, scope, p); err != nil {
		stepErr = err
	}
	// The steps above changed nodes (cordons, uncordons): plan over the cluster as it is
	// now, or a node just uncordoned would still hold a slot.
	if len(p.transitions) > 0 {
		if scope, err = r.scope(ctx, ro, nil); err != nil {
			return err
		}
	}
	plan, err := r.plan(ctx, ro, scope, p)
	if err != nil {
		return err
	}
	if !ro.Spec.Paused && !ro.Spec.Abort && len(plan.Failed) == 0 {
		for _, name := range plan.Start {
			i := slices.IndexFunc(st.Nodes, func(n v1alpha1.DriverRolloutNode) bool { return n.Name == name })
			p.started = append(p.started, name)
			if err := r.drive(ctx, ro, &st.Nodes[i], scope, p); err != nil {
				stepErr = err
			}
		}
	}
	summarize(ro, plan, p)
	return stepErr
}

// returnWholeDomains uncordons, in a rollout by domain, the members held at their
// uncordon whose domain's last member validated later in this pass: the domain comes
// back in one pass rather than one member now and the rest at the next.
func (r *Reconciler) returnWholeDomains(ctx context.Context, ro *v1alpha1.DriverRollout, scope map[string]*corev1.Node, p *passState) error {
	if ro.Spec.MaxUnavailableDomains == nil {
		return nil
	}
	var stepErr error
	for i := range ro.Status.Nodes {
		n := &ro.Status.Nodes[i]
		if n.State != string(policy.UpgradeUncordon) {
			continue
		}
		if peers := heldForDomain(ro, n); len(peers) > 0 {
			n.Message = heldMessage(n, peers) // the peers this pass left
			continue
		}
		node, err := r.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil {
			scope[n.Name] = node
		} else {
			delete(scope, n.Name)
		}
		if err := r.drive(ctx, ro, n, scope, p); err != nil {
			stepErr = err
		}
	}
	return stepErr
}

// start fixes the rollout's nodes: those of its target whose driver is not at the
// version. It returns why the rollout cannot start, if it cannot.
func (r *Reconciler) start(ctx context.Context, ro *v1alpha1.DriverRollout, p *passState) (string, error) {
	spec := &ro.Spec
	if err := policy.ValidateDriverVersion(spec.Version); err != nil {
		return err.Error(), nil
	}
	if spec.MaxUnavailable != nil {
		if _, err := policy.ParseMaxUnavailable(spec.MaxUnavailable.String()); err != nil {
			return err.Error(), nil
		}
	}
	t := TimeoutsOf(spec)
	if t.Wait < 0 || t.Drain < 0 || t.Install < 0 || t.Validate < 0 {
		return "[U2] timeouts must not be negative", nil
	}
	topo, why, err := r.rolloutTopology(ctx, ro)
	if err != nil || why != "" {
		return why, err
	}
	var targets []corev1.Node
	if spec.Pool != "" {
		list, err := r.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: spec.Pool}.String()})
		if err != nil {
			return "", err
		}
		if len(list.Items) == 0 {
			return fmt.Sprintf("pool %q has no nodes (no node carries %s=%s)", spec.Pool, policy.LabelPool, spec.Pool), nil
		}
		targets = list.Items
	} else {
		for _, name := range spec.Nodes {
			n, err := r.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return fmt.Sprintf("node %q does not exist", name), nil
			}
			if err != nil {
				return "", err
			}
			targets = append(targets, *n)
		}
	}
	var need []string
	domain := map[string]string{}
	for i := range targets {
		if policy.DriverVersion(&targets[i]) != spec.Version {
			need = append(need, targets[i].Name)
			if topo != nil {
				domain[targets[i].Name], _ = topo.DomainOf(&targets[i])
			}
		}
	}
	sort.Strings(need)
	if spec.Canary != "" && !slices.Contains(need, spec.Canary) {
		return fmt.Sprintf("canary %q is not a node of pool %q that needs the upgrade (nodes to upgrade: %s)", spec.Canary, spec.Pool, orNone(need)), nil
	}
	var others v1alpha1.DriverRolloutList
	if err := r.Client.List(ctx, &others); err != nil {
		return "", err
	}
	if err := policy.CheckNotInAnotherRollout(need, Holds(others.Items, ro.UID)); err != nil {
		return err.Error(), nil
	}
	ro.Status.Nodes = []v1alpha1.DriverRolloutNode{}
	for _, name := range need {
		ro.Status.Nodes = append(ro.Status.Nodes, v1alpha1.DriverRolloutNode{Name: name, Attempt: 1, Domain: domain[name]})
		p.move(&ro.Status.Nodes[len(ro.Status.Nodes)-1], policy.UpgradeRequired, "waiting for its wave")
	}
	ro.Status.StartTime = p.now.DeepCopy()
	return "", nil
}

// rolloutTopology is the topology of the rollout's pool (nil without one), and why the
// rollout cannot start: a rollout by domain of a pool without a topology (rule U6, as
// admission refuses it, for a rollout that came while the webhook was away).
func (r *Reconciler) rolloutTopology(ctx context.Context, ro *v1alpha1.DriverRollout) (*policy.Topology, string, error) {
	var pool *v1alpha1.Pool
	if ro.Spec.Pool != "" {
		var p v1alpha1.Pool
		err := r.Client.Get(ctx, client.ObjectKey{Name: ro.Spec.Pool}, &p)
		switch {
		case err == nil:
			pool = &p
		case !apierrors.IsNotFound(err):
			return nil, "", err
		}
	}
	if !policy.HasTopology(pool) {
		if ro.Spec.MaxUnavailableDomains != nil {
			return nil, policy.CheckMaxUnavailableDomains(pool, ro.Spec.Pool, nil, *ro.Spec.MaxUnavailableDomains).Error(), nil
		}
		return nil, "", nil
	}
	t, err := policy.ResolveTopology(pool.Spec.Topology)
	switch {
	case err != nil && ro.Spec.MaxUnavailableDomains != nil:
		return nil, err.Error(), nil
	case err != nil:
		// A topology R1 would refuse (written while the webhook was away) paces
		// nothing here: node by node goes on, without the domains' figures.
		return nil, "", nil
	}
	return &t, "", nil
}

// Holds are the nodes of the rollouts that have not ended, but the one of uid (none when
// uid is empty; rule U4
// judges them: policy.CheckNotInAnotherRollout).
func Holds(rollouts []v1alpha1.DriverRollout, uid types.UID) []policy.RolloutHold {
	var out []policy.RolloutHold
	for i := range rollouts {
		ro := &rollouts[i]
		if (uid != "" && ro.UID == uid) || Final(ro) {
			continue
		}
		for _, n := range ro.Status.Nodes {
			out = append(out, policy.RolloutHold{Rollout: ro.Name, Node: n.Name, State: n.State})
		}
	}
	return out
}

// scope reads the nodes that count for the rollout: every member of its pool (they
// all count for maxUnavailable), or its named nodes. They are read from nodes (the
// controller's cache, whose node watch wakes the rollout when they change), or live
// when nodes is nil: after this pass's own steps, which the cache may not show yet.
func (r *Reconciler) scope(ctx context.Context, ro *v1alpha1.DriverRollout, nodes client.Reader) (map[string]*corev1.Node, error) {
	get := func(name string) (*corev1.Node, error) {
		if nodes == nil {
			return r.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
		var n corev1.Node
		return &n, nodes.Get(ctx, client.ObjectKey{Name: name}, &n)
	}
	out := map[string]*corev1.Node{}
	if ro.Spec.Pool != "" {
		var list corev1.NodeList
		var err error
		if nodes == nil {
			var live *corev1.NodeList
			live, err = r.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: ro.Spec.Pool}.String()})
			if live != nil {
				list = *live
			}
		} else {
			err = nodes.List(ctx, &list, client.MatchingLabels{policy.LabelPool: ro.Spec.Pool})
		}
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	// Nodes of the rollout that left the pool still finish (or fail) in it.
	var names []string
	for _, n := range ro.Status.Nodes {
		if n.State != string(policy.UpgradeDone) && n.State != string(policy.UpgradeAborted) {
			names = append(names, n.Name)
		}
	}
	if ro.Spec.Pool == "" {
		names = append(names, ro.Spec.Nodes...)
	}
	for _, name := range names {
		if _, ok := out[name]; ok {
			continue
		}
		node, err := get(name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[name] = node
	}
	return out, nil
}

// Predict lists the waves the rollout will run from the node states in its status if
// every node succeeds, the nodes it cannot start (NotReady), and its max-unavailable as
// a node count: what --dry-run shows.
// pool is the rollout's Pool object (nil when there is none): its topology keys the
// domains of nodes the rollout has not fixed yet, its minNodes is a rollout by domain's
// floor.
func Predict(ctx context.Context, kube kubernetes.Interface, ro *v1alpha1.DriverRollout, pool *v1alpha1.Pool) (waves [][]string, waiting []string, maxU int, err error) {
	r := &Reconciler{Kube: kube, predictPool: pool}
	scope, err := r.scope(ctx, ro, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	if policy.HasTopology(pool) {
		if t, err := policy.ResolveTopology(pool.Spec.Topology); err == nil {
			for i := range ro.Status.Nodes {
				if n := &ro.Status.Nodes[i]; n.Domain == "" && scope[n.Name] != nil {
					n.Domain, _ = t.DomainOf(scope[n.Name])
				}
			}
		}
	}
	p := &passState{}
	if _, err := r.plan(ctx, ro, scope, p); err != nil {
		return nil, nil, 0, err
	}
	nodes, err := r.upgradeNodes(ctx, ro, scope)
	if err != nil {
		return nil, nil, 0, err
	}
	if p.byDomain {
		waves, waiting = policy.PredictDomainWaves(nodes, domainKeys(ro), p.maxU, p.minNodes)
	} else {
		waves, waiting = policy.PredictUpgradeWaves(nodes, p.maxU, ro.Spec.Canary)
	}
	return waves, waiting, p.maxU, nil
}

// drive takes one node as far as it goes now: step after step while each finishes at
// once, stopping at the first that waits, and at done or failed.
func (r *Reconciler) drive(ctx context.Context, ro *v1alpha1.DriverRollout, n *v1alpha1.DriverRolloutNode, scope map[string]*corev1.Node, p *passState) error {
	s := &Stepper{Kube: r.Kube, Jobs: r.Jobs, Namespace: r.Namespace}
	node := scope[n.Name]
	for range len(policy.UpgradeStates()) {
		if node == nil {
			p.move(n, policy.UpgradeFailed, fmt.Sprintf("failed in %s: the node no longer exists", n.State))
			return nil
		}
		state := policy.UpgradeState(n.State)
		if peers := heldForDomain(ro, n); len(peers) > 0 {
			n.Message = heldMessage(n, peers)
			p.retry = true
			return nil
		}
		out, err := s.Step(ctx, ro, node, n, p.now.Time)
		if err != nil {
			return fmt.Errorf("node %s, %s: %w", n.Name, state, err)
		}
		if out.Job != "" {
			n.Job = out.Job
		}
		if out.Failed {
			p.move(n, policy.UpgradeFailed, fmt.Sprintf("failed in %s: %s", state, out.Message))
			return nil
		}
		if !out.Done {
			n.Message = out.Message
			p.retry = p.retry || out.Retry
			return nil
		}
		next, ok := policy.NextUpgradeState(state)
		if !ok {
			return nil
		}
		if err := policy.CheckUpgradeTransition(state, next); err != nil {
			return err
		}
		p.move(n, next, out.Message)
		if next == policy.UpgradeDone {
			return nil
		}
		if node, err = r.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			node = nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// heldForDomain are the members of n's domain a node of a rollout by domain waits for
// at its uncordon (policy.DomainPeersNotBack).
func heldForDomain(ro *v1alpha1.DriverRollout, n *v1alpha1.DriverRolloutNode) []string {
	if ro.Spec.MaxUnavailableDomains == nil || n.State != string(policy.UpgradeUncordon) {
		return nil
	}
	return policy.DomainPeersNotBack(ro.Status.Nodes, n.Name)
}

func heldMessage(n *v1alpha1.DriverRolloutNode, peers []string) string {
	return fmt.Sprintf("validated; held out until %s of domain %s validate too: a domain returns whole", strings.Join(peers, ", "), n.Domain)
}

// plan is rule U2 over the rollout's scope as it is after this pass's steps.
func (r *Reconciler) plan(ctx context.Context, ro *v1alpha1.DriverRollout, scope map[string]*corev1.Node, p *passState) (policy.WavePlan, error) {
	nodes, err := r.upgradeNodes(ctx, ro, scope)
	if err != nil {
		return policy.WavePlan{}, err
	}
	p.maxU = 1
	if k := ro.Spec.MaxUnavailableDomains; k != nil {
		if p.minNodes, err = r.poolFloor(ctx, ro.Spec.Pool); err != nil {
			return policy.WavePlan{}, err
		}
		p.byDomain, p.maxU = true, int(max(*k, 1))
		return policy.PlanDomainWave(nodes, domainKeys(ro), p.maxU, p.minNodes), nil
	}
	if ro.Spec.MaxUnavailable != nil {
		if v, err := policy.ParseMaxUnavailable(ro.Spec.MaxUnavailable.String()); err == nil {
			p.maxU = policy.MaxUnavailableNodes(v, len(nodes))
		}
	}
	return policy.PlanUpgradeWave(nodes, p.maxU, ro.Spec.Canary), nil
}

// poolFloor is the pool's minNodes: the floor on available nodes a rollout by domain
// keeps (a pool of labels only has the floor of 1, as N3 gives it none).
func (r *Reconciler) poolFloor(ctx context.Context, name string) (int, error) {
	if r.Client == nil {
		if r.predictPool == nil {
			return 1, nil
		}
		return int(max(r.predictPool.Spec.MinNodes, 1)), nil
	}
	var pool v1alpha1.Pool
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &pool); apierrors.IsNotFound(err) {
		return 1, nil
	} else if err != nil {
		return 0, err
	}
	return int(max(pool.Spec.MinNodes, 1)), nil
}

// domainKeys keys each rollout node's domain, as it was when the rollout started.
func domainKeys(ro *v1alpha1.DriverRollout) map[string]string {
	out := make(map[string]string, len(ro.Status.Nodes))
	for _, n := range ro.Status.Nodes {
		out[n.Name] = policy.RolloutDomainKey(n.Name, n.Domain)
	}
	return out
}

// upgradeNodes is what the planner knows of the scope's nodes.
func (r *Reconciler) upgradeNodes(ctx context.Context, ro *v1alpha1.DriverRollout, scope map[string]*corev1.Node) ([]policy.UpgradeNode, error) {
	state := map[string]policy.UpgradeState{}
	pending := map[string]bool{}
	for _, n := range ro.Status.Nodes {
		state[n.Name] = policy.UpgradeState(n.State)
		if n.State == string(policy.UpgradeRequired) {
			pending[n.Name] = true
		}
	}
	var busy map[string]bool
	if len(pending) > 0 {
		var err error
		if busy, err = r.busyNodes(ctx, pending); err != nil {
			return nil, err
		}
		if err := r.addQueued(ctx, busy); err != nil {
			return nil, err
		}
	}
	var nodes []policy.UpgradeNode
	for _, name := range sortedKeys(scope) {
		n, s := scope[name], state[name]
		// A node in the middle of its upgrade holds a slot even before its cordon shows.
		unavailable := n.Spec.Unschedulable || policy.UpgradeStarted(s)
		nodes = append(nodes, policy.UpgradeNode{Name: name, State: s, Ready: policy.IsNodeReady(n), Unavailable: unavailable, Busy: busy[name]})
	}
	return nodes, nil
}

// addQueued marks busy the nodes a queue placed admitted work on (Queued).
func (r *Reconciler) addQueued(ctx context.Context, busy map[string]bool) error {
	if r.Queued == nil {
		return nil
	}
	queued, err := r.Queued.QueuedNodes(ctx)
	if err != nil {
		return err
	}
	for n := range queued {
		busy[n] = true
	}
	return nil
}

// busyNodes says which of nodes run a tenant's workload pod (not litepool's node work).
// The controller reads its pod index, so a pass costs no request however many pods the
// cluster runs; the stand-in lists the pods of these nodes only.
func (r *Reconciler) busyNodes(ctx context.Context, nodes map[string]bool) (map[string]bool, error) {
	if r.Pods != nil {
		return r.busyIndexed(nodes)
	}
	pods, err := inventory.ActivePodsOn(ctx, r.Kube, nodes)
	if err != nil {
		return nil, err
	}
	busy := map[string]bool{}
	for i := range pods {
		if inventory.IsWorkloadPod(&pods[i]) && !nodejob.IsNodeWork(&pods[i], r.Namespace) {
			busy[pods[i].Spec.NodeName] = true
		}
	}
	return busy, nil
}

func (r *Reconciler) busyIndexed(nodes map[string]bool) (map[string]bool, error) {
	if !r.Pods.HasSynced() {
		// An index still listing would call a busy node idle and upgrade it first.
		return nil, errors.New("the pod index has not listed the cluster's pods yet")
	}
	busy := map[string]bool{}
	for node := range nodes {
		entries, err := r.Pods.OnNode(node)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if pod := e.Pod(); inventory.IsWorkloadEntry(e) && !nodejob.IsNodeWork(&pod, r.Namespace) {
				busy[node] = true
				break
			}
		}
	}
	return busy, nil
}

// Counts are a rollout's nodes by where they are.
type Counts struct {
	Total, Done, Failed, InProgress, Pending, Aborted int
}

// CountsOf counts a rollout's nodes (aborted ones are not in Total).
func CountsOf(ro *v1alpha1.DriverRollout) Counts {
	var c Counts
	for _, n := range ro.Status.Nodes {
		switch s := policy.UpgradeState(n.State); {
		case s == policy.UpgradeAborted:
			c.Aborted++
			continue
		case s == policy.UpgradeDone:
			c.Done++
		case s == policy.UpgradeFailed:
			c.Failed++
		case policy.UpgradeStarted(s):
			c.InProgress++
		default:
			c.Pending++
		}
		c.Total++
	}
	return c
}

// summarize sets the phase, counts, message and condition from the nodes.
func summarize(ro *v1alpha1.DriverRollout, plan policy.WavePlan, p *passState) {
	st := &ro.Status
	c := CountsOf(ro)
	st.Total, st.Done, st.Failed = int32(c.Total), int32(c.Done), int32(c.Failed)
	st.Progress = fmt.Sprintf("%d/%d", c.Done, c.Total)
	defer measureDomains(ro, p)
	limit := fmt.Sprintf("max unavailable %d", p.maxU)
	if p.byDomain {
		limit = fmt.Sprintf("max unavailable domains %d, minNodes %d", p.maxU, p.minNodes)
	}
	reason := ""
	switch {
	case c.InProgress > 0 || len(p.started) > 0:
		st.Phase = v1alpha1.RolloutProgressing
		st.Message = fmt.Sprintf("%d/%d done; upgrading %s (%s)", c.Done, c.Total, strings.Join(inProgress(ro), ", "), limit)
	case ro.Spec.Abort:
		st.Phase = v1alpha1.RolloutAborted
		st.Message = fmt.Sprintf("aborted: %d/%d done, %d left the rollout, %d failed", c.Done, c.Total, c.Aborted, c.Failed)
	case c.Failed > 0:
		st.Phase = v1alpha1.RolloutFailed
		var msgs []string
		for _, n := range st.Nodes {
			if n.State == string(policy.UpgradeFailed) {
				msgs = append(msgs, fmt.Sprintf("node %s %s", n.Name, n.Message))
			}
		}
		st.Message = fmt.Sprintf("stopped, %d/%d done: %s; a failed node stays cordoned: fix it, then `kubectl litepool upgrade resume %s --retry-failed`",
			c.Done, c.Total, strings.Join(msgs, "; "), ro.Name)
	case c.Pending == 0:
		st.Phase = v1alpha1.RolloutSucceeded
		st.Message = fmt.Sprintf("%d/%d nodes at %s", c.Done, c.Total, ro.Spec.Version)
		if c.Total == 0 {
			st.Message = "nothing to upgrade: every node is at " + ro.Spec.Version
		}
	case ro.Spec.Paused:
		st.Phase = v1alpha1.RolloutPaused
		st.Message = fmt.Sprintf("paused: %d/%d done, %d waiting; `kubectl litepool upgrade resume %s` continues it", c.Done, c.Total, c.Pending, ro.Name)
	case plan.Stalled() && p.byDomain:
		st.Phase, reason = v1alpha1.RolloutProgressing, ReasonStalled
		st.Message = policy.Violationf("U2", "rollout %s cannot start another domain: a whole domain out would leave fewer than pool %s's minNodes %d available (unavailable now: %s); %d/%d done; bring nodes back or lower the pool's minNodes",
			ro.Name, ro.Spec.Pool, p.minNodes, orNone(plan.Unavailable), c.Done, c.Total).Error()
	case plan.Stalled():
		st.Phase, reason = v1alpha1.RolloutProgressing, ReasonStalled
		st.Message = policy.Violationf("U2", "rollout %s cannot start more nodes: max unavailable %d is taken by %d unavailable node(s) of the pool (%s); %d/%d done; bring them back or raise it: `kubectl litepool upgrade resume %s --max-unavailable N`",
			ro.Name, p.maxU, len(plan.Unavailable), strings.Join(plan.Unavailable, ", "), c.Done, c.Total, ro.Name).Error()
	case len(plan.NotReady) > 0 && len(plan.NotReady) == c.Pending:
		st.Phase, reason = v1alpha1.RolloutProgressing, ReasonWaitingForNodes
		st.Message = fmt.Sprintf("%d/%d done; waiting for NotReady node(s) %s to be Ready", c.Done, c.Total, strings.Join(plan.NotReady, ", "))
	default:
		st.Phase = v1alpha1.RolloutProgressing
		st.Message = fmt.Sprintf("%d/%d done; %d waiting for a slot", c.Done, c.Total, c.Pending)
	}
	if reason == "" {
		reason = string(st.Phase)
	}
	setComplete(ro, reason, st.Message)
}

// measureDomains records each domain's progress and the domain-unavailable time, and
// when the rollout ended.
func measureDomains(ro *v1alpha1.DriverRollout, p *passState) {
	st := &ro.Status
	if Final(ro) && st.CompletionTime == nil {
		st.CompletionTime = p.now.DeepCopy()
	}
	end := p.now.Time
	if st.CompletionTime != nil {
		end = st.CompletionTime.Time
	}
	domains, total := policy.RolloutDomains(st.Nodes, end)
	st.Domains, st.DomainUnavailableSeconds = domains, int64(total/time.Second)
}

func setComplete(ro *v1alpha1.DriverRollout, reason, msg string) {
	status := metav1.ConditionFalse
	if ro.Status.Phase == v1alpha1.RolloutSucceeded {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&ro.Status.Conditions, metav1.Condition{Type: ConditionComplete, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: ro.Generation})
}

func inProgress(ro *v1alpha1.DriverRollout) []string {
	var out []string
	for _, n := range ro.Status.Nodes {
		if policy.UpgradeStarted(policy.UpgradeState(n.State)) {
			out = append(out, n.Name+" ("+n.State+")")
		}
	}
	return out
}

// publish tells the cluster about the moves a stored status records: each node's
// annotations (state for people and tools to read; litepool never takes orders from
// them) and an Event on the node. Both are news, not state anything is decided from:
// one lost to an error is not owed, and the node's next move writes them again.
func (r *Reconciler) publish(ctx context.Context, ro *v1alpha1.DriverRollout, moves []transition) {
	for _, m := range moves {
		ann := map[string]*string{
			policy.AnnotationUpgradeState: ptrTo(string(m.to)), policy.AnnotationUpgradeTarget: ptrTo(ro.Spec.Version),
			policy.AnnotationUpgradeMessage: ptrTo(m.msg), policy.AnnotationUpgradeRun: ptrTo(ro.Name),
		}
		if m.to == policy.UpgradeAborted {
			for k := range ann {
				ann[k] = nil
			}
		}
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		_, _ = r.Kube.CoreV1().Nodes().Patch(ctx, m.node, types.MergePatchType, data, metav1.PatchOptions{})
		ref := events.Ref{Kind: "Node", Name: m.node, APIVersion: "v1"}
		what := fmt.Sprintf("driver upgrade to %s (rollout %s)", ro.Spec.Version, ro.Name)
		switch {
		case m.from == "":
		case m.to == policy.UpgradeFailed:
			_ = r.Recorder.Warning(ctx, ref, "DriverUpgradeFailed", "%s %s; the node stays cordoned", what, m.msg)
		case m.to == policy.UpgradeAborted:
			_ = r.Recorder.Normal(ctx, ref, "DriverUpgradeAborted", "%s aborted before it started on this node", what)
		case m.from == policy.UpgradeFailed:
			_ = r.Recorder.Normal(ctx, ref, "DriverUpgradeRetry", "%s: %s", what, m.msg)
		case m.to == policy.UpgradeDone:
			_ = r.Recorder.Normal(ctx, ref, "DriverUpgraded", "%s: %s done%s", what, m.from, prefixed(m.msg))
		default:
			_ = r.Recorder.Normal(ctx, ref, "DriverUpgrade", "%s: %s done, next %s%s", what, m.from, m.to, prefixed(m.msg))
		}
	}
}

func prefixed(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func ptrTo(s string) *string { return &s }

func orNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
