package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// TaintQuarantine is the taint the health loop puts on a member it holds out
// (NoSchedule; its value is the reason). It is not a cordon: cordons stay the
// operator's, and a quarantine ends only through the loop or the health verb.
const TaintQuarantine = Prefix + "quarantine"

// Health signal reasons.
const (
	SignalDeviceUnhealthy = "DeviceUnhealthy"
	SignalNotReady        = "NotReady"
	SignalStressFailed    = "StressTestFailed"
	SignalDeviceTaint     = "DeviceTaint"
	// SignalConditionPrefix + the condition type is the reason of a condition signal.
	SignalConditionPrefix = "Condition/"
)

// Reasons the loop gives a node besides its signals.
const (
	ReasonFlapping          = "Flapping"
	ReasonRecheckFailed     = "RecheckFailed"
	ReasonRemediationFailed = "RemediationFailed"
	ReasonHeldByHand        = "HeldByHand"
	ReasonReleasedByHand    = "ReleasedByHand"
	ReasonBreaker           = "CircuitBreaker"
	ReasonRecovered         = "Recovered"
)

// Health policy defaults (docs/health.md says where each comes from).
const (
	DefaultNotReadyGrace         = 5 * time.Minute
	DefaultHoldTime              = 10 * time.Minute
	DefaultFlapWindow            = 24 * time.Hour
	DefaultMaxQuarantinedPercent = 25
	// RecheckRetry is how long the loop waits before a new re-check run when the last
	// one skipped the node (busy) or was aborted.
	RecheckRetry = time.Minute
	// healthHistory is how many transitions a node's entry keeps.
	healthHistory = 10
)

// DefaultHealthConditions are the node conditions Node Problem Detector's default
// monitors and NVSentinel's health monitors set (docs/health.md lists the sources).
// MindCluster reports NPU faults in ConfigMaps and through the device plugin's
// allocatable, not as node conditions, so none of its names is here.
var DefaultHealthConditions = []v1alpha1.HealthCondition{
	{Type: "KernelDeadlock"},
	{Type: "ReadonlyFilesystem"},
	{Type: "SysLogsXIDError", Fatal: true},
	{Type: "SysLogsSXIDError"},
	{Type: "SysLogsGPUFallenOff", Fatal: true},
	{Type: "GpuMemWatch"},
	{Type: "GpuNvlinkWatch"},
	{Type: "GpuPcieWatch", Fatal: true},
	{Type: "GpuThermalWatch"},
	{Type: "GpuInforomWatch"},
}

// HealthSettings is a pool's health policy with every default filled in.
type HealthSettings struct {
	Enabled        bool
	DryRun         bool
	Conditions     []v1alpha1.HealthCondition
	NotReadyGrace  time.Duration
	Drain          bool
	Remediation    *v1alpha1.RemediationSpec
	RecheckImage   string
	RecheckCommand []string
	// RecheckDefinition names the operator's re-check definition, whose image and
	// command replace RecheckImage and RecheckCommand.
	RecheckDefinition     string
	RecheckTests          []v1alpha1.StressTest
	HoldTime              time.Duration
	MaxQuarantinedPercent int32
	FlapWindow            time.Duration
	// DomainOutPercent and Topology are the domain rule (spec.health.domainOutPercent):
	// 0 and nil when it is off.
	DomainOutPercent int32
	Topology         *Topology
}

// HealthSettingsOf fills in the defaults of a pool's spec.health; a pool without one
// has the loop off.
func HealthSettingsOf(pool *v1alpha1.Pool) HealthSettings {
	h := pool.Spec.Health
	if h == nil {
		return HealthSettings{}
	}
	s := HealthSettings{Enabled: true, DryRun: h.Mode == v1alpha1.HealthDryRun, Conditions: h.Conditions,
		NotReadyGrace: durationOr(h.NotReadyGrace, DefaultNotReadyGrace), Drain: h.Drain, Remediation: h.Remediation,
		HoldTime: durationOr(h.HoldTime, DefaultHoldTime), FlapWindow: durationOr(h.FlapWindow, DefaultFlapWindow),
		MaxQuarantinedPercent: h.MaxQuarantinedPercent}
	if s.Conditions == nil {
		s.Conditions = DefaultHealthConditions
	}
	if s.MaxQuarantinedPercent <= 0 {
		s.MaxQuarantinedPercent = DefaultMaxQuarantinedPercent
	}
	if t, ok := healthTopology(pool); ok {
		s.DomainOutPercent, s.Topology = h.DomainOutPercent, &t
	}
	if st := pool.Spec.StressTest; st != nil {
		s.RecheckImage, s.RecheckTests = st.Image, st.Tests
	}
	if r := h.Recheck; r != nil {
		if r.Image != "" {
			s.RecheckImage = r.Image
		}
		if len(r.Tests) > 0 {
			s.RecheckTests = r.Tests
		}
		s.RecheckCommand = r.Command
		s.RecheckDefinition = r.Definition
	}
	if len(s.RecheckTests) == 0 {
		s.RecheckTests = []v1alpha1.StressTest{"npu"}
	}
	return s
}

// Rechecks says whether the pool has a re-check to run: an operator's definition, or a
// stress image (approved or not: an unapproved one holds the node out). Without either
// a node returns after the hold time, not re-checked.
func (s HealthSettings) Rechecks() bool {
	return s.RecheckImage != "" || s.RecheckDefinition != ""
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

// HealthSignal is one fault seen on a node.
type HealthSignal struct {
	Reason  string
	Message string
	Fatal   bool
}

// NodeHealthFacts is what the loop reads about a node: the node itself and the DRA
// devices of it that carry a NoSchedule or NoExecute taint (ResourceSlices and
// DeviceTaintRules; empty where the cluster does not use DRA).
type NodeHealthFacts struct {
	Node           *corev1.Node
	TaintedDevices []string
}

// HealthSignals are the faults of a node under settings at now, by reason.
// A failed litepool stress test is the node's runwhere.ai/health=degraded, which only
// litepool's stress runs write.
func HealthSignals(f NodeHealthFacts, s HealthSettings, accel Accelerators, now time.Time) []HealthSignal {
	n := f.Node
	var out []HealthSignal
	var dropped []string
	for name, capacity := range n.Status.Capacity {
		if !accel.Is(name) {
			continue
		}
		alloc := n.Status.Allocatable[name]
		if alloc.Cmp(capacity) < 0 {
			dropped = append(dropped, fmt.Sprintf("%s allocatable %s < capacity %s", name, alloc.String(), capacity.String()))
		}
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		out = append(out, HealthSignal{Reason: SignalDeviceUnhealthy, Message: "the device plugin dropped devices: " + strings.Join(dropped, ", ")})
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status != corev1.ConditionTrue && now.Sub(c.LastTransitionTime.Time) >= s.NotReadyGrace {
				out = append(out, HealthSignal{Reason: SignalNotReady,
					Message: fmt.Sprintf("NotReady (%s) since %s, longer than %s", c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339), s.NotReadyGrace)})
			}
			continue
		}
		for _, rule := range s.Conditions {
			want := rule.Status
			if want == "" {
				want = corev1.ConditionTrue
			}
			if string(c.Type) == rule.Type && c.Status == want {
				msg := fmt.Sprintf("node condition %s=%s", c.Type, c.Status)
				if c.Reason != "" || c.Message != "" {
					msg += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
				}
				out = append(out, HealthSignal{Reason: SignalConditionPrefix + rule.Type, Message: msg, Fatal: rule.Fatal})
			}
		}
	}
	if len(f.TaintedDevices) > 0 {
		out = append(out, HealthSignal{Reason: SignalDeviceTaint, Message: "DRA device taints on " + strings.Join(f.TaintedDevices, ", ")})
	}
	if n.Labels[LabelHealth] == HealthDegraded {
		out = append(out, HealthSignal{Reason: SignalStressFailed, Message: "failed a litepool stress test: " + n.Annotations[AnnotationStressResult]})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out
}

// BreakerRoom is how many more members of a pool may be quarantined automatically:
// the cap is maxPercent of members, rounded down, and at least one node.
func BreakerRoom(members, out int, maxPercent int32) int {
	limit := members * int(maxPercent) / 100
	if limit < 1 {
		limit = 1
	}
	if out >= limit {
		return 0
	}
	return limit - out
}

// CountsAsOut says whether a node in state is held out of scheduling (tainted).
func CountsAsOut(state v1alpha1.NodeHealthState) bool {
	switch state {
	case "", v1alpha1.NodeHealthHealthy, v1alpha1.NodeHealthWaiting:
		return false
	}
	return true
}

// HealthInput is everything one step of a node's health needs.
type HealthInput struct {
	// Entry is the node's current entry; nil when it has none.
	Entry    *v1alpha1.NodeHealthStatus
	Signals  []HealthSignal
	Settings HealthSettings
	Now      time.Time
	// BreakerRoom says whether the pool's breaker lets one more node out.
	BreakerRoom bool
	// Drained: no workload pod is left on the node.
	Drained bool
	// Job is the remediation Job's outcome: "", Running, Succeeded, Failed.
	Job string
	// Recheck is the re-check run's outcome for this node: "" (no run), Running,
	// Passed, Failed, Retry (skipped or aborted: run again).
	Recheck string
}

// Outcomes of a re-check or remediation, as HealthInput reads them.
const (
	OutcomeRunning   = "Running"
	OutcomeSucceeded = "Succeeded"
	OutcomePassed    = "Passed"
	OutcomeFailed    = "Failed"
	OutcomeRetry     = "Retry"
)

// HealthAction is what the reconciler must do for a step.
type HealthAction string

// Actions a step asks for; at most one per step.
const (
	ActionNone         HealthAction = ""
	ActionDrain        HealthAction = "Drain"
	ActionRemediate    HealthAction = "Remediate"
	ActionRecheck      HealthAction = "Recheck"
	ActionNewRecheck   HealthAction = "NewRecheck"
	ActionAlertBreaker HealthAction = "AlertBreaker"
)

// HealthStep is one step of the loop for one node: its next entry (nil: drop it),
// whether it must be tainted, the action to take and when to look again (0: when
// something changes).
type HealthStep struct {
	Entry   *v1alpha1.NodeHealthStatus
	Taint   bool
	Action  HealthAction
	Requeue time.Duration
	// Changed says the state (not only the message) moved: an Event is due.
	Changed bool
}

// NextHealth is the health state machine: Healthy → Quarantined → [Draining] →
// [Remediating] → Rechecking → Holding → Healthy; HeldOut after a second fault within
// the flap window, a failed re-check or remediation, until a person releases it
// (Released); Waiting while the breaker keeps a faulty node in service.
func NextHealth(in HealthInput) HealthStep {
	s := in.Settings
	now := metav1.NewTime(in.Now)
	faulty := len(in.Signals) > 0
	reason, msg, fatal := summarizeSignals(in.Signals)
	var e *v1alpha1.NodeHealthStatus
	if in.Entry != nil {
		e = in.Entry.DeepCopy()
	}
	move := func(state v1alpha1.NodeHealthState, why, message string) HealthStep {
		if e == nil {
			e = &v1alpha1.NodeHealthStatus{}
		}
		changed := e.State != state || e.Reason != why
		e.State, e.Reason, e.Message = state, why, message
		if changed {
			e.Since = now
			e.History = append(e.History, v1alpha1.NodeHealthTransition{Time: now, State: state, Reason: why})
			if len(e.History) > healthHistory {
				e.History = e.History[len(e.History)-healthHistory:]
			}
		}
		return HealthStep{Entry: e, Taint: CountsAsOut(state), Changed: changed}
	}
	state := v1alpha1.NodeHealthHealthy
	if e != nil {
		state = e.State
	}
	switch state {
	case v1alpha1.NodeHealthReleased:
		e.Drained, e.Remediated, e.StressRun, e.Job, e.Fatal, e.FaultedAt = false, false, "", "", false, nil
		e.ReturnedAt = nil // a person's release forgets the flap history
		why := "released by " + e.By + " (spec.health.release)"
		if e.By == "" {
			why = "released: its hold was removed from spec.health.hold"
		}
		st := move(v1alpha1.NodeHealthHealthy, ReasonReleasedByHand, why)
		st.Requeue = time.Second
		return st
	case v1alpha1.NodeHealthHeldOut:
		return HealthStep{Entry: e, Taint: true}
	case v1alpha1.NodeHealthHealthy, v1alpha1.NodeHealthWaiting:
		if !faulty {
			if e == nil {
				return HealthStep{}
			}
			if e.State == v1alpha1.NodeHealthWaiting || e.ReturnedAt == nil || in.Now.Sub(e.ReturnedAt.Time) >= s.FlapWindow {
				return HealthStep{Changed: e.State == v1alpha1.NodeHealthWaiting}
			}
			return HealthStep{Entry: e, Requeue: e.ReturnedAt.Add(s.FlapWindow).Sub(in.Now)}
		}
		if !in.BreakerRoom {
			st := move(v1alpha1.NodeHealthWaiting, reason,
				fmt.Sprintf("%s; not quarantined: the circuit breaker allows at most %d%% of the pool out", msg, s.MaxQuarantinedPercent))
			st.Action = ActionAlertBreaker
			return st
		}
		flapped := e != nil && e.ReturnedAt != nil && in.Now.Sub(e.ReturnedAt.Time) < s.FlapWindow
		if e != nil {
			e.Drained, e.Remediated, e.StressRun, e.Job = false, false, "", ""
		}
		if flapped {
			st := move(v1alpha1.NodeHealthHeldOut, ReasonFlapping,
				fmt.Sprintf("%s; it faulted again within %s of returning (%s): held out until released by hand", msg, s.FlapWindow, e.ReturnedAt.UTC().Format(time.RFC3339)))
			st.Entry.Fatal, st.Entry.FaultedAt = fatal, &now
			return st
		}
		st := move(v1alpha1.NodeHealthQuarantined, reason, msg)
		st.Entry.Fatal, st.Entry.FaultedAt = fatal, &now
		return advance(st, in)
	}
	// Out of service: a new fatal signal is remembered for the drain.
	if fatal {
		e.Fatal = true
	}
	switch state {
	case v1alpha1.NodeHealthQuarantined, v1alpha1.NodeHealthDraining, v1alpha1.NodeHealthRemediating:
		mustDrain := e.Fatal && s.Drain && !e.Drained
		if faulty && state == v1alpha1.NodeHealthQuarantined && (e.Reason != reason || e.Message != msg) && !e.Remediated && !mustDrain {
			st := move(v1alpha1.NodeHealthQuarantined, reason, msg)
			return advance(st, in)
		}
		return advance(HealthStep{Entry: e, Taint: true}, in)
	case v1alpha1.NodeHealthRechecking:
		// The run's own failure sets the stress signal: the outcome is read first, and a
		// stress signal alone does not interrupt a re-check.
		switch {
		case in.Recheck == OutcomeFailed:
			return move(v1alpha1.NodeHealthHeldOut, ReasonRecheckFailed,
				fmt.Sprintf("failed the re-check (stress run %s): held out until released by hand", e.StressRun))
		case faulty && !onlyStressFailed(in.Signals):
			st := move(v1alpha1.NodeHealthQuarantined, reason, msg+" (again, during the re-check)")
			st.Entry.StressRun = ""
			return st
		case in.Recheck == OutcomePassed:
			st := move(v1alpha1.NodeHealthHolding, ReasonRecovered,
				fmt.Sprintf("passed the re-check (stress run %s); returns after %s with its signals clear", e.StressRun, s.HoldTime))
			st.Requeue = s.HoldTime
			return st
		case in.Recheck == OutcomeRetry || in.Recheck == "":
			return HealthStep{Entry: e, Taint: true, Action: ActionNewRecheck, Requeue: RecheckRetry}
		}
		return HealthStep{Entry: e, Taint: true}
	case v1alpha1.NodeHealthHolding:
		if faulty {
			st := move(v1alpha1.NodeHealthQuarantined, reason, msg+" (again, during the hold time)")
			st.Entry.StressRun = ""
			return advance(st, in)
		}
		if left := e.Since.Add(s.HoldTime).Sub(in.Now); left > 0 {
			return HealthStep{Entry: e, Taint: true, Requeue: left}
		}
		st := move(v1alpha1.NodeHealthHealthy, ReasonRecovered, "back in service")
		if !unbackedEpisode(e.History) {
			// An episode that no signal began is no fault: it does not make a later one a flap.
			st.Entry.ReturnedAt = &now
		}
		st.Entry.Drained, st.Entry.Remediated, st.Entry.Job, st.Entry.StressRun, st.Entry.Fatal, st.Entry.FaultedAt = false, false, "", "", false, nil
		st.Requeue = s.FlapWindow
		return st
	}
	return HealthStep{Entry: e, Taint: CountsAsOut(state)}
}

// unbackedEpisode: the node's last quarantine began on memory alone (ReasonUnbacked),
// not on a signal.
func unbackedEpisode(h []v1alpha1.NodeHealthTransition) bool {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].State == v1alpha1.NodeHealthQuarantined {
			return h[i].Reason == ReasonUnbacked
		}
	}
	return false
}

// advance takes a node that is out through drain and remediation to the re-check.
// DrainRecheck is how soon a drain under way is looked at again when nothing wakes it:
// the controller is woken by the changes of the pods on a quarantined node, so this
// only bounds what a missed event costs.
const DrainRecheck = time.Minute

func advance(st HealthStep, in HealthInput) HealthStep {
	s, e := in.Settings, st.Entry
	faulty := len(in.Signals) > 0
	reason, msg, _ := summarizeSignals(in.Signals)
	set := func(state v1alpha1.NodeHealthState, why, message string) {
		if e.State != state {
			e.Since = metav1.NewTime(in.Now)
			e.History = append(e.History, v1alpha1.NodeHealthTransition{Time: e.Since, State: state, Reason: why})
			if len(e.History) > healthHistory {
				e.History = e.History[len(e.History)-healthHistory:]
			}
			st.Changed = true
		}
		e.State, e.Reason, e.Message = state, why, message
	}
	if e.Fatal && s.Drain && !e.Drained {
		if in.Drained {
			e.Drained = true
			st.Changed = true
		} else {
			set(v1alpha1.NodeHealthDraining, e.Reason, e.Message)
			st.Action = ActionDrain
			st.Requeue = DrainRecheck
			return st
		}
	}
	if s.Remediation != nil && !e.Remediated {
		switch in.Job {
		case OutcomeSucceeded:
			e.Remediated = true
			st.Changed = true
		case OutcomeFailed:
			set(v1alpha1.NodeHealthHeldOut, ReasonRemediationFailed, fmt.Sprintf("remediation Job %s failed: held out until released by hand", e.Job))
			return st
		default:
			set(v1alpha1.NodeHealthRemediating, e.Reason, e.Message)
			st.Action = ActionRemediate
			// No time to wait: the controller watches the Job, whose end (or its
			// deadline, activeDeadlineSeconds) wakes the loop.
			return st
		}
	}
	if faulty && !onlyStressFailed(in.Signals) {
		if e.State != v1alpha1.NodeHealthQuarantined {
			set(v1alpha1.NodeHealthQuarantined, reason, msg)
		}
		return st
	}
	set(v1alpha1.NodeHealthRechecking, e.Reason, "signals clear; re-checking with the pool's stress test")
	st.Action = ActionRecheck
	return st
}

// onlyStressFailed: the one signal is a failed stress test, which only a passing
// stress run clears, so the re-check runs while it is up.
func onlyStressFailed(sig []HealthSignal) bool {
	return len(sig) == 1 && sig[0].Reason == SignalStressFailed
}

func summarizeSignals(sig []HealthSignal) (reason, msg string, fatal bool) {
	var reasons, msgs []string
	for _, s := range sig {
		reasons = append(reasons, s.Reason)
		msgs = append(msgs, s.Message)
		fatal = fatal || s.Fatal
	}
	return strings.Join(reasons, ","), strings.Join(msgs, "; "), fatal
}

// FatalEvidence says whether the node shows a fatal fault now (a fatal signal). It is the
// only evidence: the entry's fatal flag is written into the Pool's status, and so is the
// reason the loop's quarantine taint is made from, both by anyone who may write
// pools/status. A fault that cleared before its drain began is re-checked, not drained.
func FatalEvidence(signals []HealthSignal) bool {
	for _, sig := range signals {
		if sig.Fatal {
			return true
		}
	}
	return false
}

// QuarantineTaint is the taint of a node held out for reason.
func QuarantineTaint(reason string) corev1.Taint {
	v := strings.NewReplacer("/", ".", ",", ".").Replace(reason)
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-_.")
	}
	return corev1.Taint{Key: TaintQuarantine, Value: v, Effect: corev1.TaintEffectNoSchedule}
}
