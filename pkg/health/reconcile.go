// Package health runs the node health loop of every Pool that has spec.health:
// signals read from the API (device-plugin allocatable, node conditions, NotReady,
// failed stress tests) → quarantine with a litepool taint → optional drain and
// remediation Job → re-check with a StressRun → hold → return. The rules are
// pkg/policy's (NextHealth); this package reads the cluster, applies their steps and
// keeps each node's place in the Pool's status, which only the controller and the
// health verb write. docs/health.md has the whole loop.
package health

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/pass"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Labels of the Jobs and StressRuns the loop creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	ManagedBy      = "litepool"
	Component      = "health"
)

// ReasonImageNotApproved holds out a node whose re-check or remediation image the
// operator has not approved (--health-images).
const ReasonImageNotApproved = policy.ReasonImageNotApproved

// DefaultRemediationTimeout bounds a remediation Job when the policy gives none.
const DefaultRemediationTimeout = 30 * time.Minute

// Reconciler takes one pool's members a step along the health loop each time it is
// called, from what the cluster holds now; it starts nothing in the background.
type Reconciler struct {
	// Client reads Pools, nodes and StressRuns and writes Pool status and StressRuns.
	Client client.Client
	// Live reads a Pool from the API server when its cached entry and the node's taint
	// disagree (nil: Client).
	Live client.Reader
	// Kube patches nodes, evicts pods, creates Jobs and reads pods live.
	Kube kubernetes.Interface
	// Jobs, when set (the controller's cache of litepool's namespace, whose Jobs it
	// watches), is where remediation Jobs are read: their end wakes the loop, which
	// does not ask again on a timer. Without it (the preview) they are read live.
	Jobs     client.Reader
	Recorder *events.Recorder
	// Namespace is litepool's own: remediation Jobs run there.
	Namespace    string
	Accelerators policy.Accelerators
	// Images are the operator-approved repositories or exact references
	// (--health-images, matched by policy.ImageApproved): a re-check or remediation image
	// outside them is not run, and the node is held out.
	Images []string
	// Definitions are the operator's remediations and re-checks by name
	// (--health-definition): a Pool names one, and only these run.
	Definitions map[string]Definition
	// DRA says the cluster serves ResourceSlices: a device a driver taints there is a
	// fault of its node.
	DRA bool
	Now func() time.Time
}

// Step is what the loop decided for one member: the preview prints these.
type Step struct {
	Node    string
	From    v1alpha1.NodeHealthState
	Signals []policy.HealthSignal
	policy.HealthStep

	node *corev1.Node
	// prev is the entry as stored before this step: what it referenced and the new
	// entry does not is deleted once the new one is stored.
	prev *v1alpha1.NodeHealthStatus
	// start: the entry names a Job or run that is to be made once the entry is stored
	// (a write that loses a race then leaves nothing behind).
	start bool
	// image is what the Job or run that start makes runs, for the Event.
	image string
	// refused says why the stored entry was not honoured (an entry no signal, hold or
	// taint backs, past the breaker): it is dropped and the node stays in service.
	refused string
}

// Reconcile takes the pool req names a step on (pass.Pass): what of each member's step
// comes first (a taint off, a drain), the entries stored in the Pool's status, then
// what they call for (a taint on, a remediation Job, a re-check run, deletions of what
// they no longer name) and the Events. It asks to be called again when time is what a
// step waits for.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := pass.Pass[*v1alpha1.Pool]{Client: r.Client, New: func() *v1alpha1.Pool { return &v1alpha1.Pool{} }, Decide: r.decide}
	return p.Reconcile(ctx, req)
}

func (r *Reconciler) decide(ctx context.Context, pool *v1alpha1.Pool) (pass.Decision, error) {
	s := policy.HealthSettingsOf(pool)
	if !s.Enabled {
		return pass.Decision{}, r.turnOff(ctx, pool)
	}
	members, err := r.members(ctx, pool.Name)
	if err != nil {
		return pass.Decision{}, err
	}
	steps, err := r.Plan(ctx, pool, members)
	if err != nil {
		return pass.Decision{}, err
	}
	var d pass.Decision
	var entries []v1alpha1.NodeHealthStatus
	for i := range steps {
		st := &steps[i]
		if !s.DryRun {
			if err := r.apply(ctx, pool, s, st); err != nil {
				return pass.Decision{}, err
			}
		}
		if st.Entry != nil {
			entries = append(entries, *st.Entry)
		}
		if st.Requeue > 0 && (d.Requeue == 0 || st.Requeue < d.Requeue) {
			d.Requeue = st.Requeue
		}
	}
	pool.Status.NodeHealth = entries
	setCounts(pool)
	d.Effects = append(d.Effects, func(ctx context.Context) error { return r.followAll(ctx, pool, s, steps) })
	return d, nil
}

// followAll follows every step once its entry is stored and records its Event, one node
// after another: a node whose step could not be followed (a taint, a re-check run) stops
// neither the others' steps nor their Events. The retry that the joined error asks for
// finds the entries stored and unchanged, and records nothing: an Event not written now
// is never written.
func (r *Reconciler) followAll(ctx context.Context, pool *v1alpha1.Pool, s policy.HealthSettings, steps []Step) error {
	var errs []error
	for i := range steps {
		st := &steps[i]
		if err := r.follow(ctx, pool, s, st); err != nil {
			errs = append(errs, err)
		}
		r.record(ctx, pool, s, st)
	}
	return errors.Join(errs...)
}

func setCounts(p *v1alpha1.Pool) {
	p.Status.QuarantinedNodes, p.Status.BreakerTripped = 0, false
	for _, e := range p.Status.NodeHealth {
		if policy.CountsAsOut(e.State) {
			p.Status.QuarantinedNodes++
		}
		if e.State == v1alpha1.NodeHealthWaiting {
			p.Status.BreakerTripped = true
		}
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// taintedDevices reads the drivers' ResourceSlices (from the cache, in the controller)
// for devices tainted NoSchedule or NoExecute, by node.
func (r *Reconciler) taintedDevices(ctx context.Context) (map[string][]string, error) {
	if !r.DRA {
		return nil, nil
	}
	var slices resourcev1.ResourceSliceList
	if err := r.Client.List(ctx, &slices); err != nil {
		return nil, err
	}
	return inventory.TaintedDevicesByNode(slices.Items), nil
}

func (r *Reconciler) members(ctx context.Context, pool string) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{policy.LabelPool: pool}); err != nil {
		return nil, err
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	return nodes.Items, nil
}

// Plan is the step of every member (and of every entry whose node left the pool) from
// what the cluster holds now; it changes nothing. Members are taken by name, so the
// breaker lets the same nodes out on every pass.
func (r *Reconciler) Plan(ctx context.Context, pool *v1alpha1.Pool, members []corev1.Node) ([]Step, error) {
	s := policy.HealthSettingsOf(pool)
	now := r.now()
	entries := map[string]*v1alpha1.NodeHealthStatus{}
	for i := range pool.Status.NodeHealth {
		e := &pool.Status.NodeHealth[i]
		entries[e.Node] = e
	}
	tainted, err := r.taintedDevices(ctx)
	if err != nil {
		return nil, err
	}
	signals := map[string][]policy.HealthSignal{}
	for i := range members {
		n := &members[i]
		signals[n.Name] = policy.HealthSignals(policy.NodeHealthFacts{Node: n, TaintedDevices: tainted[n.Name]}, s, r.Accelerators, now)
	}
	// The breaker counts the members out on more than the Pool's status (a signal, a
	// hold, the loop's taint: what policy.NodeOut, the quota's and the domain view's
	// computation, leaves out as quarantined); an entry with none of these is memory,
	// honoured only in the room the breaker has left once this pass's signals are
	// served. Members held with their domain count too: a fault elsewhere waits while
	// they fill the breaker, and the domain rule fits a new hold, whole, into what the
	// breaker has left after every member's own step.
	capacity := policy.PoolCapacity(pool, nodePointers(members), r.Accelerators)
	counted := map[string]bool{}
	backings := map[string]policy.MemoryBacking{}
	domainHeld := map[string]bool{}
	out, newFaults := 0, 0
	for i := range members {
		n := &members[i]
		e := entries[n.Name]
		b, err := r.backing(ctx, pool, n, e, signals[n.Name])
		if err != nil {
			return nil, err
		}
		backings[n.Name] = b
		domainHeld[n.Name] = heldWithDomain(e, n)
		switch {
		case capacity.Out[n.Name] == policy.OutQuarantined || (e != nil && policy.CountsAsOut(e.State) && (s.DryRun || !policy.Unbacked(e, b))):
			counted[n.Name] = true
			out++
		case b.Signalled && (e == nil || !policy.CountsAsOut(e.State) || domainHeld[n.Name]):
			newFaults++
		}
	}
	domains := newDomainPass(s, members)
	memoryRoom := policy.MemoryRoom(len(members), out, newFaults, s.MaxQuarantinedPercent)
	var steps []Step
	seen := map[string]bool{}
	for i := range members {
		n := &members[i]
		seen[n.Name] = true
		stored := entries[n.Name]
		// The stored entry is checked against the node's taint, then a person's orders
		// from spec.health are applied: the status is the loop's memory, never an order.
		var e *v1alpha1.NodeHealthStatus
		witnessed := false
		if !domainHeld[n.Name] {
			e, witnessed = policy.WitnessedEntry(stored, n, now)
		}
		if witnessed {
			// The caches of Pools and nodes are not in step: an entry just stored
			// and its taint just put on (or taken off) may reach them in either order.
			// Only what the API server holds now is judged.
			if stored, n, err = r.readLive(ctx, pool.Name, n); err != nil {
				return nil, err
			}
			domainHeld[n.Name] = heldWithDomain(stored, n)
			e, witnessed = policy.WitnessedEntry(stored, n, now)
		}
		if domainHeld[n.Name] {
			// A member held with its domain has no fault of its own: the domain rule
			// decides again below whether it stays out, from its domain's faults, never
			// from its entry.
			e, witnessed = inServiceEntry(stored), false
		}
		e = policy.StickyUnbacked(e, n, len(signals[n.Name]) > 0)
		e, ordered := policy.HealthOrders(pool.Spec.Health, e, n, now)
		if !s.DryRun && !ordered && policy.Unbacked(e, backings[n.Name]) {
			honoured, why := policy.HonourUnbacked(e, memoryRoom > 0, s.MaxQuarantinedPercent, now)
			if honoured == nil {
				steps = append(steps, Step{Node: n.Name, From: stored.State, Signals: signals[n.Name], node: n, prev: stored, refused: why,
					HealthStep: policy.HealthStep{Changed: true}})
				continue
			}
			memoryRoom--
			witnessed = witnessed || honoured != e
			e = honoured
		}
		if e, err = r.checkHolding(ctx, pool, s, e); err != nil {
			return nil, err
		}
		heldSlot := domainHeld[n.Name] && counted[n.Name]
		others := out
		if heldSlot {
			others-- // its own slot: a held member that faults takes no more room
		}
		in := policy.HealthInput{Entry: e, Settings: s, Now: now, Signals: signals[n.Name],
			BreakerRoom: policy.BreakerRoom(len(members), others, s.MaxQuarantinedPercent) > 0}
		if e != nil && e.Fatal && !e.Drained && !policy.FatalEvidence(in.Signals) {
			// Fatal (the drain's reason) is believed from the node, never from the
			// Pool's status alone, which a pools/status writer may write.
			in.Entry = e.DeepCopy()
			in.Entry.Fatal = false
			e = in.Entry
		}
		gone := false
		if e != nil {
			if in.Recheck, err = r.recheckOutcome(ctx, pool, e); err != nil {
				return nil, err
			}
			if in.Job, gone, err = r.jobOutcome(ctx, e); err != nil {
				return nil, err
			}
			if s.Remediation != nil && !e.Remediated && len(in.Signals) == 0 && (e.Job == "" || gone) {
				// A remediation starts only on the node's word, never on an entry of the
				// Pool's status alone, which a pools/status writer may write: with no
				// signal now, the node goes to its re-check instead.
				in.Entry = e.DeepCopy()
				in.Entry.Remediated, in.Entry.Job, in.Job, gone = true, "", "", false
				e = in.Entry
			}
			if e.Fatal && s.Drain && !e.Drained {
				left, err := r.workloadPods(ctx, n.Name)
				if err != nil {
					return nil, err
				}
				in.Drained = len(left) == 0
			}
		}
		st := policy.NextHealth(in)
		if st.Entry != nil {
			st.Entry.Node = n.Name
			domains.recordEpisode(st.Entry, e, n)
		}
		st.Changed = st.Changed || witnessed || ordered
		if s.DryRun && st.Entry != nil {
			st.Taint, st.Action = false, policy.ActionNone
		}
		wasOut := counted[n.Name]
		// A held member in service on its own stays counted until the domain rule
		// decides: the members after it must not take its slot.
		if nowOut := st.Entry != nil && policy.CountsAsOut(st.Entry.State); nowOut != wasOut && !heldSlot {
			if nowOut {
				out++
			} else {
				out--
			}
		}
		from := v1alpha1.NodeHealthState("")
		if stored != nil {
			from = stored.State
		}
		if st.Requeue == 0 {
			st.Requeue = untilGrace(n, s, now)
		}
		step := Step{Node: n.Name, From: from, Signals: in.Signals, HealthStep: st, node: n, prev: stored}
		// The Job the stored entry names was never made (the pass that named it failed
		// after its write) or was deleted: it is made now.
		step.start = gone && st.Entry != nil && st.Entry.Job == e.Job && st.Entry.State == v1alpha1.NodeHealthRemediating
		steps = append(steps, step)
		domains.member(n, stored, st.Entry, backings[n.Name], signals[n.Name])
	}
	domains.apply(steps, now)
	for name, e := range entries {
		if !seen[name] {
			steps = append(steps, Step{Node: name, From: e.State, HealthStep: policy.HealthStep{Changed: true}, prev: e})
		}
	}
	return steps, nil
}

// backing is what, besides the Pool's status, says member n is out. The cached node
// may not yet show the taint the loop put on after storing an entry: a node whose
// entry would be memory alone is read from the API server first.
func (r *Reconciler) backing(ctx context.Context, pool *v1alpha1.Pool, n *corev1.Node, e *v1alpha1.NodeHealthStatus, signals []policy.HealthSignal) (policy.MemoryBacking, error) {
	b := policy.MemoryBacking{Signalled: len(signals) > 0, Tainted: policy.QuarantineTaintOf(n) != nil}
	for _, h := range pool.Spec.Health.Hold {
		b.Held = b.Held || h.Node == n.Name
	}
	if !policy.Unbacked(e, b) {
		return b, nil
	}
	live, err := r.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return b, nil
	}
	if err != nil {
		return b, err
	}
	b.Tainted = policy.QuarantineTaintOf(live) != nil
	return b, nil
}

// readLive reads the pool's stored entry of node n and the node from the API server,
// not the caches.
func (r *Reconciler) readLive(ctx context.Context, pool string, n *corev1.Node) (*v1alpha1.NodeHealthStatus, *corev1.Node, error) {
	live := r.Live
	if live == nil {
		live = r.Client
	}
	var p v1alpha1.Pool
	if err := live.Get(ctx, client.ObjectKey{Name: pool}, &p); err != nil {
		return nil, nil, err
	}
	node, err := r.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node = n
	} else if err != nil {
		return nil, nil, err
	}
	for i := range p.Status.NodeHealth {
		if p.Status.NodeHealth[i].Node == n.Name {
			return &p.Status.NodeHealth[i], node, nil
		}
	}
	return nil, node, nil
}

// untilGrace is how long until a NotReady node's grace period ends (0: it is Ready or
// past it).
func untilGrace(n *corev1.Node, s policy.HealthSettings, now time.Time) time.Duration {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			if left := c.LastTransitionTime.Add(s.NotReadyGrace).Sub(now); left > 0 {
				return left + time.Second
			}
		}
	}
	return 0
}

// hasTaint says whether the cached node already carries what the step wants.
func hasTaint(n *corev1.Node, on bool, reason string) bool {
	want := policy.QuarantineTaint(reason)
	for _, t := range n.Spec.Taints {
		if t.Key == policy.TaintQuarantine {
			return on && t.Value == want.Value && t.Effect == want.Effect
		}
	}
	return !on
}

// apply makes what of one step comes before its entry is stored: a taint coming off
// (so a stored entry never says in service while the taint is on), then the action.
// A taint goes on once the entry is stored (follow): a tainted node whose entry does not
// hold it out is one whose entry was changed (policy.WitnessedEntry).
func (r *Reconciler) apply(ctx context.Context, pool *v1alpha1.Pool, s policy.HealthSettings, st *Step) error {
	if !st.Taint && (st.node == nil || !hasTaint(st.node, false, "")) {
		if err := r.setTaint(ctx, st.Node, false, ""); err != nil {
			return err
		}
	}
	e := st.Entry
	switch st.Action {
	case policy.ActionDrain:
		refused, err := r.drain(ctx, st.Node)
		if refused {
			st.Requeue = RefusedRetry
		}
		return err
	case policy.ActionRemediate:
		if e.Job != "" {
			return nil
		}
		job, err := r.remediation(pool, e, s.Remediation)
		if err == nil {
			err = nodejob.Approve(job)
		}
		if err != nil {
			r.holdOut(e, err)
			st.Changed, st.Taint = true, true
			return nil
		}
		e.Job = nodejob.Name(job)
		st.image = job.Image
		st.Changed, st.start = true, true
	case policy.ActionRecheck, policy.ActionNewRecheck:
		if st.Action == policy.ActionRecheck && e.StressRun != "" {
			return nil
		}
		if !s.Rechecks() {
			e.State, e.Reason, e.Since = v1alpha1.NodeHealthHolding, policy.ReasonRecovered, metav1.NewTime(r.now())
			e.Message = "not re-checked: the pool names no re-check definition (spec.health.recheck.definition) and has no stress-test image (spec.stressTest.image or spec.health.recheck.image); returns after the hold time"
			e.History = append(e.History, v1alpha1.NodeHealthTransition{Time: e.Since, State: e.State, Reason: e.Reason})
			st.Changed, st.Requeue = true, s.HoldTime
			return nil
		}
		rs, err := r.recheck(s)
		if err != nil {
			r.holdOut(e, err)
			st.Changed, st.Taint = true, true
			return nil
		}
		st.image = rs.RecheckImage
		prev := ""
		if st.prev != nil {
			prev = st.prev.StressRun
		}
		e.StressRun = RecheckRunName(pool, st.Node, e.Since.UTC().Format(time.RFC3339)+"/"+prev)
		st.Changed, st.start = true, true
	}
	return nil
}

// ApprovedBy is where the operator approves health images, for refusals.
const ApprovedBy = "--health-images of Deployment litepool-controller"

// recheck is s with the re-check's image and command resolved: the operator's
// definition when the pool names one, else the pool's stress image if the operator
// approved it (--health-images).
func (r *Reconciler) recheck(s policy.HealthSettings) (policy.HealthSettings, error) {
	if s.RecheckDefinition != "" {
		d, err := r.definition("re-check", "spec.health.recheck", s.RecheckDefinition, "", nil)
		if err != nil {
			return s, &holdError{ReasonNoDefinition, err}
		}
		s.RecheckImage, s.RecheckCommand = d.Image, d.Command
		return s, nil
	}
	if err := nodejob.ApproveImage("re-check", s.RecheckImage, r.Images, ApprovedBy); err != nil {
		return s, &holdError{ReasonImageNotApproved, err}
	}
	return s, nil
}

// holdError is why a node is held out: a reason and the refusal.
type holdError struct {
	reason string
	err    error
}

func (h *holdError) Error() string { return h.err.Error() }

func (r *Reconciler) holdOut(e *v1alpha1.NodeHealthStatus, err error) {
	reason := ReasonImageNotApproved
	var h *holdError
	if errors.As(err, &h) {
		reason = h.reason
	}
	e.State, e.Reason, e.Since = v1alpha1.NodeHealthHeldOut, reason, metav1.NewTime(r.now())
	e.Message = err.Error() + ": held out until released by hand"
	e.History = append(e.History, v1alpha1.NodeHealthTransition{Time: e.Since, State: e.State, Reason: e.Reason})
}

// setTaint puts on or takes off the quarantine taint; a node that is gone needs none.
func (r *Reconciler) setTaint(ctx context.Context, node string, on bool, reason string) error {
	_, _, err := nodeops.ModifyNode(ctx, r.Kube, node, cmdutil.DryRunNone, func(n *corev1.Node) error {
		var keep []corev1.Taint
		var cur *corev1.Taint
		for i, t := range n.Spec.Taints {
			if t.Key == policy.TaintQuarantine {
				cur = &n.Spec.Taints[i]
				continue
			}
			keep = append(keep, t)
		}
		want := policy.QuarantineTaint(reason)
		switch {
		case !on && cur == nil:
		case !on:
			n.Spec.Taints = keep
		case cur != nil && cur.Value == want.Value && cur.Effect == want.Effect:
		default:
			// The time the quarantine began, kept while its reason changes: a release
			// given before it (spec.health.release) does not return the node.
			want.TimeAdded = &metav1.Time{Time: r.now()}
			if cur != nil && cur.TimeAdded != nil {
				want.TimeAdded = cur.TimeAdded
			}
			n.Spec.Taints = append(keep, want)
		}
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node %s: quarantine taint: %w", node, err)
	}
	return nil
}

// drainOptions are the health loop's drain: every pod but DaemonSet and mirror pods and
// litepool's node work (a driver installer of a rollout under way, a stress test:
// nodejob.IsNodeWork, which trusts litepool's namespace, not labels), those no
// controller manages too.
func (r *Reconciler) drainOptions() nodeops.StepOptions {
	return nodeops.StepOptions{Namespace: r.Namespace, Force: true}
}

// workloadPods are the pods the drain must still move: those not already terminating.
func (r *Reconciler) workloadPods(ctx context.Context, node string) ([]corev1.Pod, error) {
	pods, err := nodeops.DrainPods(ctx, r.Kube, node, r.drainOptions())
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// RefusedRetry is how soon a drain asks again for an eviction a disruption budget
// refused: what frees the budget (a pod elsewhere becoming ready) sends the loop no
// event.
const RefusedRetry = 2 * time.Second

// drain is one pass of litepool's drain (nodeops.DrainStep): the Eviction API moves
// each pod; a PodDisruptionBudget that says no (429) is honoured, and refused says the
// drain asks again after RefusedRetry. The pods that go wake the loop (the controller
// watches the pods on quarantined nodes).
func (r *Reconciler) drain(ctx context.Context, node string) (refused bool, err error) {
	res, err := nodeops.DrainStep(ctx, r.Kube, node, r.drainOptions())
	for _, p := range res.Evicted {
		_ = r.Recorder.Normal(ctx, events.Ref{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, APIVersion: "v1", UID: string(p.UID)},
			"HealthDrain", "evicted from node %s, quarantined by litepool's health loop", node)
	}
	return len(res.Refused) > 0, err
}

// checkHolding: a node Holding has passed its re-check, which is a run this pool
// controls, and its hold time runs from that run's end; an entry naming another run
// (a pools/status writer's word) goes back to re-checking, and one dated back keeps the
// run's end as its start. Without a re-check (no definition, no image) there is no run
// to check.
func (r *Reconciler) checkHolding(ctx context.Context, pool *v1alpha1.Pool, s policy.HealthSettings, e *v1alpha1.NodeHealthStatus) (*v1alpha1.NodeHealthStatus, error) {
	if e == nil || e.State != v1alpha1.NodeHealthHolding || !s.Rechecks() {
		return e, nil
	}
	outcome, run, err := r.recheckRun(ctx, pool, e)
	if err != nil {
		return nil, err
	}
	out := e.DeepCopy()
	if outcome != policy.OutcomePassed {
		out.State, out.StressRun = v1alpha1.NodeHealthRechecking, ""
		return out, nil
	}
	if end := run.Status.CompletionTime; end != nil && end.After(out.Since.Time) {
		out.Since = *end
	}
	return out, nil
}

func (r *Reconciler) recheckOutcome(ctx context.Context, pool *v1alpha1.Pool, e *v1alpha1.NodeHealthStatus) (string, error) {
	outcome, _, err := r.recheckRun(ctx, pool, e)
	return outcome, err
}

// recheckRun reads the re-check run the entry names and its outcome for the node. A
// run this pool does not control is no re-check of it (the name is a status writer's
// claim): a new one is made.
func (r *Reconciler) recheckRun(ctx context.Context, pool *v1alpha1.Pool, e *v1alpha1.NodeHealthStatus) (string, *v1alpha1.StressRun, error) {
	if e.StressRun == "" {
		return "", nil, nil
	}
	var run v1alpha1.StressRun
	if err := r.Client.Get(ctx, client.ObjectKey{Name: e.StressRun}, &run); err != nil {
		if apierrors.IsNotFound(err) {
			return policy.OutcomeRetry, nil, nil
		}
		return "", nil, err
	}
	if ref := metav1.GetControllerOf(&run); ref == nil || ref.UID != pool.UID {
		return policy.OutcomeRetry, nil, nil
	}
	outcome, err := runOutcome(&run, e.Node)
	return outcome, &run, err
}

func runOutcome(run *v1alpha1.StressRun, node string) (string, error) {
	if !run.Status.Phase.Finished() {
		return policy.OutcomeRunning, nil
	}
	outcome := ""
	for _, res := range run.Status.Results {
		if res.Node != node {
			continue
		}
		switch res.Outcome {
		case v1alpha1.StressOutcomeFailed:
			return policy.OutcomeFailed, nil
		case v1alpha1.StressOutcomePassed:
			outcome = policy.OutcomePassed
		default:
			return policy.OutcomeRetry, nil
		}
	}
	if outcome == "" {
		return policy.OutcomeRetry, nil
	}
	return outcome, nil
}

// jobOutcome reads the remediation Job the entry names; gone: it does not exist.
func (r *Reconciler) jobOutcome(ctx context.Context, e *v1alpha1.NodeHealthStatus) (outcome string, gone bool, err error) {
	if e.Job == "" || e.Remediated {
		return "", false, nil
	}
	o, err := r.runner().Outcome(ctx, e.Job)
	if err != nil {
		return "", false, err
	}
	switch o.Phase {
	case nodejob.Succeeded:
		return policy.OutcomeSucceeded, false, nil
	case nodejob.Failed:
		return policy.OutcomeFailed, false, nil
	case nodejob.Gone:
		// Named in a stored entry and not made yet (the pass that named it ended
		// first), or deleted: made again by this pass.
		return policy.OutcomeRunning, true, nil
	}
	return policy.OutcomeRunning, false, nil
}

func (r *Reconciler) runner() *nodejob.Runner {
	return &nodejob.Runner{Kube: r.Kube, Cache: r.Jobs, Namespace: r.Namespace}
}

// follow makes what a stored step named (a remediation Job, a re-check run) and
// deletes what the node's previous entry named and its new one does not: both only
// once the entry is stored, so a pass whose write lost a race makes nothing.
func (r *Reconciler) follow(ctx context.Context, pool *v1alpha1.Pool, s policy.HealthSettings, st *Step) error {
	e := st.Entry
	if !s.DryRun && st.Taint && e != nil && (st.node == nil || !hasTaint(st.node, true, e.Reason)) {
		if err := r.setTaint(ctx, st.Node, true, e.Reason); err != nil {
			return err
		}
	}
	if st.start && e != nil && !s.DryRun {
		switch {
		case e.State == v1alpha1.NodeHealthRemediating && e.Job != "":
			job, err := r.remediation(pool, e, s.Remediation)
			if err == nil {
				_, err = r.runner().Ensure(ctx, job)
			}
			if err != nil {
				return fmt.Errorf("node %s: remediation: %w", st.Node, err)
			}
		case e.State == v1alpha1.NodeHealthRechecking && e.StressRun != "":
			rs, err := r.recheck(s)
			if err != nil {
				return fmt.Errorf("node %s: re-check: %w", st.Node, err)
			}
			if err := r.Client.Create(ctx, RecheckRun(pool, st.Node, e.StressRun, rs)); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("node %s: creating the re-check StressRun: %w", st.Node, err)
			}
		}
	}
	if st.prev == nil {
		return nil
	}
	if run := st.prev.StressRun; run != "" && (e == nil || e.StressRun != run) {
		if err := r.deleteRun(ctx, pool, run); err != nil {
			return fmt.Errorf("node %s: deleting the finished re-check StressRun %s: %w", st.Node, run, err)
		}
	}
	if job := st.prev.Job; job != "" && (e == nil || e.Job != job) {
		if err := r.deleteJob(ctx, pool, job); err != nil {
			return fmt.Errorf("node %s: deleting the finished remediation Job %s: %w", st.Node, job, err)
		}
	}
	return nil
}

// deleteRun deletes the StressRun name if pool controls it: a name in the Pool's status
// is a claim its writer made, and a run of anyone else's is never deleted for it.
func (r *Reconciler) deleteRun(ctx context.Context, pool *v1alpha1.Pool, name string) error {
	var run v1alpha1.StressRun
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &run); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref := metav1.GetControllerOf(&run); ref == nil || ref.UID != pool.UID {
		return nil
	}
	err := r.Client.Delete(ctx, &run, client.Preconditions{UID: &run.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	return client.IgnoreNotFound(err)
}

// deleteJob deletes the Job name in litepool's namespace if pool controls it (a
// remediation of this pool, never a rollout's installer a status entry names).
func (r *Reconciler) deleteJob(ctx context.Context, pool *v1alpha1.Pool, name string) error {
	jobs := r.Kube.BatchV1().Jobs(r.Namespace)
	job, err := jobs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != pool.UID {
		return nil
	}
	err = jobs.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &job.UID},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	return client.IgnoreNotFound(err)
}

// turnOff is a pool whose spec.health went away: its nodes lose the quarantine taint
// and the loop forgets them.
func (r *Reconciler) turnOff(ctx context.Context, pool *v1alpha1.Pool) error {
	for _, e := range pool.Status.NodeHealth {
		if err := r.setTaint(ctx, e.Node, false, ""); err != nil {
			return err
		}
	}
	pool.Status.NodeHealth, pool.Status.QuarantinedNodes, pool.Status.BreakerTripped = nil, 0, false
	return nil
}

// record writes the Event of a step that moved.
func (r *Reconciler) record(ctx context.Context, pool *v1alpha1.Pool, s policy.HealthSettings, st *Step) {
	if !st.Changed {
		return
	}
	ref := events.Ref{Kind: "Node", Name: st.Node, APIVersion: "v1"}.About(events.PoolRef(pool.Name))
	prefix := ""
	if s.DryRun {
		prefix = "dry run (spec.health.mode=DryRun), nothing done: "
	}
	e := st.Entry
	if st.refused != "" {
		_ = r.Recorder.Warning(ctx, ref, "HealthEntryNotHonoured", "%snode %s: %s", prefix, st.Node, st.refused)
		return
	}
	if e == nil {
		_ = r.Recorder.Normal(ctx, ref, "HealthForgotten", "%snode %s left pool %s's health loop (was %s)", prefix, st.Node, pool.Name, st.From)
		return
	}
	reason := "Health" + string(e.State)
	msg := fmt.Sprintf("%snode %s: %s → %s (%s): %s", prefix, st.Node, orHealthy(st.From), e.State, e.Reason, e.Message)
	switch e.State {
	case v1alpha1.NodeHealthHealthy:
		_ = r.Recorder.Normal(ctx, ref, reason, "%s", msg)
	case v1alpha1.NodeHealthWaiting:
		_ = r.Recorder.Warning(ctx, ref, "HealthBreakerTripped", "%s", msg)
	default:
		if e.Job != "" && st.Action == policy.ActionRemediate {
			msg += "; remediation Job " + r.Namespace + "/" + e.Job
		}
		if e.StressRun != "" && e.State == v1alpha1.NodeHealthRechecking {
			msg += "; stress run " + e.StressRun
		}
		if st.image != "" {
			msg += " (image " + st.image + ")"
		}
		_ = r.Recorder.Warning(ctx, ref, reason, "%s", msg)
	}
}

func orHealthy(s v1alpha1.NodeHealthState) v1alpha1.NodeHealthState {
	if s == "" {
		return v1alpha1.NodeHealthHealthy
	}
	return s
}

// RecheckRunName is the re-check StressRun of node in pool for key (the time its
// entry began re-checking and the run it replaces): the same name for the same
// inputs, another for every new attempt.
func RecheckRunName(pool *v1alpha1.Pool, node, key string) string {
	h := fnv.New64a()
	for _, part := range []string{string(pool.UID), node, "recheck", key} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	return nodejob.BoundedName("health-", node, h.Sum64())
}

// RecheckRun is the StressRun name that re-checks node; the Pool controls it, so
// deleting the Pool deletes it.
func RecheckRun(pool *v1alpha1.Pool, node, name string, s policy.HealthSettings) *v1alpha1.StressRun {
	return &v1alpha1.StressRun{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:          map[string]string{LabelManagedBy: ManagedBy, LabelComponent: Component},
			OwnerReferences: []metav1.OwnerReference{nodejob.ControllerRef(pool, v1alpha1.GroupVersion.WithKind("Pool"))}},
		Spec: v1alpha1.StressRunSpec{Pool: pool.Name, Nodes: []string{node}, Tests: s.RecheckTests, Image: s.RecheckImage, Command: s.RecheckCommand},
	}
}

// PurposeRemediation is the remediation Job's component label and name prefix.
const PurposeRemediation = "remediation"

// remediation is the Job that resets or reboots a quarantined node: the operator's
// definition the pool names (pinned to the node, privileged with the host's root at
// /host, as the driver installer), one per fault episode, controlled by the Pool. The
// definition is the operator's approval of its image.
func (r *Reconciler) remediation(pool *v1alpha1.Pool, e *v1alpha1.NodeHealthStatus, spec *v1alpha1.RemediationSpec) (nodejob.Spec, error) {
	d, err := r.definition("remediation", "spec.health.remediation", spec.Definition, spec.Image, spec.Command)
	if err != nil {
		return nodejob.Spec{}, &holdError{ReasonNoDefinition, err}
	}
	key := ""
	if e.FaultedAt != nil {
		key = e.FaultedAt.UTC().Format(time.RFC3339)
	}
	return nodejob.Spec{Owner: pool, OwnerKind: v1alpha1.GroupVersion.WithKind("Pool"), Node: e.Node, Purpose: PurposeRemediation, Key: key,
		Image: d.Image, Command: d.Command, HostAccess: true, Timeout: d.timeout(spec.Timeout),
		Approved: []string{d.Image}, ApprovedBy: "--health-definition " + spec.Definition + " of Deployment litepool-controller",
		Env: []corev1.EnvVar{{Name: "POOL", Value: pool.Name}, {Name: "REASON", Value: e.Reason}}}, nil
}

// Selector of the StressRuns and Jobs the loop made.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelComponent: Component})
}
