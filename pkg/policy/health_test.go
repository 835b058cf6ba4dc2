package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func healthNode(alloc string, conds ...corev1.NodeCondition) *corev1.Node {
	capacity := corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8"), "cpu": resource.MustParse("8")}
	allocatable := corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse(alloc), "cpu": resource.MustParse("7")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable, Conditions: conds}}
}

func defaultSettings() HealthSettings {
	return HealthSettingsOf(&v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Health: &v1alpha1.HealthPolicy{},
		StressTest: &v1alpha1.StressTestSpec{Image: "stress:1"}}})
}

func reasons(sig []HealthSignal) []string {
	var out []string
	for _, s := range sig {
		out = append(out, s.Reason)
	}
	return out
}

func TestHealthSettingsDefaults(t *testing.T) {
	assert.False(t, HealthSettingsOf(&v1alpha1.Pool{}).Enabled, "no spec.health: the loop is off")
	s := defaultSettings()
	assert.True(t, s.Enabled)
	assert.False(t, s.DryRun)
	assert.Equal(t, DefaultHealthConditions, s.Conditions)
	assert.Equal(t, []time.Duration{5 * time.Minute, 10 * time.Minute, 24 * time.Hour}, []time.Duration{s.NotReadyGrace, s.HoldTime, s.FlapWindow})
	assert.Equal(t, int32(25), s.MaxQuarantinedPercent)
	assert.False(t, s.Drain)
	assert.Nil(t, s.Remediation)
	assert.Equal(t, "stress:1", s.RecheckImage)
	assert.Equal(t, []v1alpha1.StressTest{"npu"}, s.RecheckTests)

	none := HealthSettingsOf(&v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Health: &v1alpha1.HealthPolicy{Conditions: []v1alpha1.HealthCondition{}}}})
	assert.Empty(t, none.Conditions, "an empty list watches no condition")
}

func TestHealthSignals(t *testing.T) {
	accel := Accelerators{}
	s := defaultSettings()
	ready := func(status corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(since)}
	}
	cases := []struct {
		name    string
		node    *corev1.Node
		devices []string
		want    []string
		fatal   bool
	}{
		{"healthy", healthNode("8", ready(corev1.ConditionTrue, t0)), nil, nil, false},
		{"allocatable below capacity", healthNode("7"), nil, []string{SignalDeviceUnhealthy}, false},
		{"cpu allocatable below capacity is not a device", healthNode("8"), nil, nil, false},
		{"NotReady within grace", healthNode("8", ready(corev1.ConditionFalse, t0.Add(-time.Minute))), nil, nil, false},
		{"NotReady past grace", healthNode("8", ready(corev1.ConditionUnknown, t0.Add(-6*time.Minute))), nil, []string{SignalNotReady}, false},
		{"NPD condition", healthNode("8", corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue}), nil, []string{"Condition/KernelDeadlock"}, false},
		{"NPD condition False", healthNode("8", corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse}), nil, nil, false},
		{"fatal NVSentinel condition", healthNode("8", corev1.NodeCondition{Type: "SysLogsXIDError", Status: corev1.ConditionTrue, Reason: "Xid79"}), nil, []string{"Condition/SysLogsXIDError"}, true},
		{"unlisted condition", healthNode("8", corev1.NodeCondition{Type: "SomethingElse", Status: corev1.ConditionTrue}), nil, nil, false},
		{"DRA device taint", healthNode("8"), []string{"gpu-0"}, []string{SignalDeviceTaint}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := HealthSignals(NodeHealthFacts{Node: c.node, TaintedDevices: c.devices}, s, accel, t0)
			assert.Equal(t, c.want, reasons(got))
			_, _, fatal := summarizeSignals(got)
			assert.Equal(t, c.fatal, fatal)
		})
	}
	degraded := healthNode("7")
	degraded.Labels[LabelHealth] = HealthDegraded
	assert.Equal(t, []string{SignalDeviceUnhealthy, SignalStressFailed}, reasons(HealthSignals(NodeHealthFacts{Node: degraded}, s, accel, t0)))
	msg := HealthSignals(NodeHealthFacts{Node: healthNode("6")}, s, accel, t0)[0].Message
	assert.Equal(t, "the device plugin dropped devices: huawei.com/Ascend910 allocatable 6 < capacity 8", msg)
}

func TestBreakerRoom(t *testing.T) {
	for _, c := range []struct{ members, out, pct, want int }{
		{4, 0, 25, 1}, {4, 1, 25, 0}, {3, 0, 25, 1}, {10, 1, 25, 1}, {10, 2, 25, 0}, {10, 0, 100, 10}, {1, 0, 1, 1},
	} {
		assert.Equal(t, c.want, BreakerRoom(c.members, c.out, int32(c.pct)), "%+v", c)
	}
}

// walk runs the machine step by step, feeding each step's entry to the next.
type walk struct {
	t     *testing.T
	s     HealthSettings
	entry *v1alpha1.NodeHealthStatus
	now   time.Time
}

func (w *walk) step(in HealthInput) HealthStep {
	in.Entry, in.Settings, in.Now = w.entry, w.s, w.now
	st := NextHealth(in)
	w.entry = st.Entry
	return st
}

func (w *walk) state() v1alpha1.NodeHealthState {
	if w.entry == nil {
		return ""
	}
	return w.entry.State
}

var dropped = []HealthSignal{{Reason: SignalDeviceUnhealthy, Message: "dropped"}}

func TestHealthLoopReturnsANodeAfterRecheckAndHold(t *testing.T) {
	w := &walk{t: t, s: defaultSettings(), now: t0}
	assert.Equal(t, HealthStep{}, w.step(HealthInput{BreakerRoom: true}), "a healthy node with no entry stays so")

	st := w.step(HealthInput{Signals: dropped, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, w.state())
	assert.True(t, st.Taint)
	assert.True(t, st.Changed)
	assert.Equal(t, ActionNone, st.Action, "the signal is still up: no re-check yet")
	assert.Equal(t, SignalDeviceUnhealthy, w.entry.Reason)

	st = w.step(HealthInput{Signals: dropped, BreakerRoom: false})
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, w.state(), "the breaker does not let a quarantined node go")
	assert.False(t, st.Changed)

	w.now = t0.Add(time.Minute)
	st = w.step(HealthInput{})
	assert.Equal(t, v1alpha1.NodeHealthRechecking, w.state())
	assert.Equal(t, ActionRecheck, st.Action)
	assert.True(t, st.Taint)
	w.entry.StressRun = "health-n1-1"

	st = w.step(HealthInput{Recheck: OutcomeRunning})
	assert.Equal(t, v1alpha1.NodeHealthRechecking, w.state())
	assert.Equal(t, ActionNone, st.Action)

	st = w.step(HealthInput{Recheck: OutcomePassed})
	assert.Equal(t, v1alpha1.NodeHealthHolding, w.state())
	assert.Equal(t, 10*time.Minute, st.Requeue)
	assert.True(t, st.Taint)

	w.now = w.now.Add(9 * time.Minute)
	st = w.step(HealthInput{})
	assert.Equal(t, v1alpha1.NodeHealthHolding, w.state())
	assert.Equal(t, time.Minute, st.Requeue)

	w.now = w.now.Add(time.Minute)
	st = w.step(HealthInput{})
	assert.Equal(t, v1alpha1.NodeHealthHealthy, w.state())
	assert.False(t, st.Taint)
	require.NotNil(t, w.entry.ReturnedAt)
	assert.Equal(t, []v1alpha1.NodeHealthState{"Quarantined", "Rechecking", "Holding", "Healthy"}, states(w.entry.History))

	w.now = w.now.Add(25 * time.Hour)
	st = w.step(HealthInput{})
	assert.Nil(t, st.Entry, "past the flap window the entry is forgotten")
}

func states(h []v1alpha1.NodeHealthTransition) []v1alpha1.NodeHealthState {
	var out []v1alpha1.NodeHealthState
	for _, x := range h {
		out = append(out, x.State)
	}
	return out
}

func TestHealthLoopSignalDuringHoldRequarantines(t *testing.T) {
	w := &walk{t: t, s: defaultSettings(), now: t0}
	w.entry = &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHolding, Since: metav1.NewTime(t0), StressRun: "r"}
	st := w.step(HealthInput{Signals: dropped})
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, w.state())
	assert.Empty(t, w.entry.StressRun, "the next re-check is a new run")
	assert.True(t, st.Taint)
}

func TestHealthLoopFailedRecheckHoldsOut(t *testing.T) {
	w := &walk{t: t, s: defaultSettings(), now: t0}
	w.entry = &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthRechecking, StressRun: "r1"}
	stressFailed := []HealthSignal{{Reason: SignalStressFailed, Message: "npu failed"}}
	st := w.step(HealthInput{Signals: stressFailed, Recheck: OutcomeRunning})
	assert.Equal(t, v1alpha1.NodeHealthRechecking, w.state(), "a stress signal alone does not interrupt the re-check")
	assert.False(t, st.Changed)
	// The failing run labels the node degraded as it ends: the outcome decides.
	w.step(HealthInput{Signals: stressFailed, Recheck: OutcomeFailed})
	assert.Equal(t, v1alpha1.NodeHealthHeldOut, w.state())
	assert.Equal(t, ReasonRecheckFailed, w.entry.Reason)
	assert.Contains(t, w.entry.Message, "stress run r1")
	st = w.step(HealthInput{})
	assert.Equal(t, v1alpha1.NodeHealthHeldOut, w.state(), "signals clear: still out")
	assert.True(t, st.Taint)

	w.entry.State, w.entry.By = v1alpha1.NodeHealthReleased, "alice" // what HealthOrders gives for a release
	st = w.step(HealthInput{})
	assert.Equal(t, v1alpha1.NodeHealthHealthy, w.state())
	assert.False(t, st.Taint)
	assert.Nil(t, w.entry.ReturnedAt, "a release forgets the flap history")
	st = w.step(HealthInput{Signals: dropped, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, w.state(), "after a release a fault quarantines, not holds out")
	assert.True(t, st.Taint)
}

func TestHealthLoopRecheckRetriesWhenSkipped(t *testing.T) {
	w := &walk{t: t, s: defaultSettings(), now: t0}
	w.entry = &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthRechecking, StressRun: "r1"}
	st := w.step(HealthInput{Recheck: OutcomeRetry})
	assert.Equal(t, ActionNewRecheck, st.Action)
	assert.Equal(t, RecheckRetry, st.Requeue)
	assert.Equal(t, v1alpha1.NodeHealthRechecking, w.state())
}

func TestHealthLoopFlappingNodeIsHeldOut(t *testing.T) {
	w := &walk{t: t, s: defaultSettings(), now: t0}
	returned := metav1.NewTime(t0.Add(-time.Hour))
	w.entry = &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHealthy, ReturnedAt: &returned}
	st := w.step(HealthInput{Signals: dropped, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthHeldOut, w.state())
	assert.Equal(t, ReasonFlapping, w.entry.Reason)
	assert.True(t, st.Taint)
	st = w.step(HealthInput{})
	assert.Equal(t, v1alpha1.NodeHealthHeldOut, w.state(), "the signal clears: still held out")
	assert.True(t, st.Taint)

	old := metav1.NewTime(t0.Add(-25 * time.Hour))
	w.entry = &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHealthy, ReturnedAt: &old}
	w.step(HealthInput{Signals: dropped, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, w.state(), "outside the window: an ordinary fault")
}

func TestHealthLoopBreakerKeepsNodeInService(t *testing.T) {
	w := &walk{t: t, s: defaultSettings(), now: t0}
	st := w.step(HealthInput{Signals: dropped, BreakerRoom: false})
	assert.Equal(t, v1alpha1.NodeHealthWaiting, w.state())
	assert.False(t, st.Taint)
	assert.Equal(t, ActionAlertBreaker, st.Action)
	assert.Contains(t, w.entry.Message, "at most 25% of the pool")
	st = w.step(HealthInput{Signals: dropped, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, w.state(), "room again: quarantined")
	assert.True(t, st.Taint)

	w.entry = &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthWaiting}
	st = w.step(HealthInput{})
	assert.Nil(t, st.Entry, "a waiting node whose signal clears is forgotten")
	assert.True(t, st.Changed)
}

func TestHealthLoopDrainsFatalFaultsAndRemediates(t *testing.T) {
	s := defaultSettings()
	s.Drain = true
	s.Remediation = &v1alpha1.RemediationSpec{Image: "reset:1"}
	w := &walk{t: t, s: s, now: t0}
	xid := []HealthSignal{{Reason: "Condition/SysLogsXIDError", Message: "xid", Fatal: true}}
	st := w.step(HealthInput{Signals: xid, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthDraining, w.state())
	assert.Equal(t, ActionDrain, st.Action)
	assert.True(t, st.Taint)
	st = w.step(HealthInput{Signals: xid})
	assert.Equal(t, ActionDrain, st.Action, "pods remain: drain again")
	st = w.step(HealthInput{Signals: xid, Drained: true})
	assert.True(t, w.entry.Drained)
	assert.Equal(t, v1alpha1.NodeHealthRemediating, w.state())
	assert.Equal(t, ActionRemediate, st.Action)
	w.entry.Job = "health-n1"
	st = w.step(HealthInput{Signals: xid, Job: OutcomeRunning})
	assert.Equal(t, ActionRemediate, st.Action)
	assert.Zero(t, st.Requeue, "no timer: the controller watches the Job, whose end wakes the loop")
	st = w.step(HealthInput{Job: OutcomeSucceeded})
	assert.True(t, w.entry.Remediated)
	assert.Equal(t, v1alpha1.NodeHealthRechecking, w.state())
	assert.Equal(t, ActionRecheck, st.Action)

	// A remediation that fails holds the node out.
	w = &walk{t: t, s: s, now: t0}
	w.entry = &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthRemediating, Job: "health-n1", Drained: true}
	w.step(HealthInput{Job: OutcomeFailed})
	assert.Equal(t, v1alpha1.NodeHealthHeldOut, w.state())
	assert.Equal(t, ReasonRemediationFailed, w.entry.Reason)

	// A non-fatal fault is not drained.
	w = &walk{t: t, s: s, now: t0}
	st = w.step(HealthInput{Signals: dropped, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthRemediating, w.state())
	assert.Equal(t, ActionRemediate, st.Action)
}

func TestHealthLoopStressFailureIsRecheckedWhileUp(t *testing.T) {
	w := &walk{t: t, s: defaultSettings(), now: t0}
	st := w.step(HealthInput{Signals: []HealthSignal{{Reason: SignalStressFailed, Message: "npu failed"}}, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthRechecking, w.state(), "only a passing stress run clears a stress failure")
	assert.Equal(t, ActionRecheck, st.Action)
	assert.Equal(t, []v1alpha1.NodeHealthState{"Quarantined", "Rechecking"}, states(w.entry.History))
}

func TestQuarantineTaint(t *testing.T) {
	assert.Equal(t, corev1.Taint{Key: "runwhere.ai/quarantine", Value: "Condition.KernelDeadlock.DeviceUnhealthy", Effect: corev1.TaintEffectNoSchedule},
		QuarantineTaint("Condition/KernelDeadlock,DeviceUnhealthy"))
}
