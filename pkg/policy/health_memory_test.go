package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Issue 38 part 3: an entry of the Pool's status that nothing else backs is memory.
func TestUnbackedEntries(t *testing.T) {
	forged := &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: ReasonFlapping, Fatal: true, StressRun: "theirs", Job: "theirs"}
	assert.True(t, Unbacked(forged, MemoryBacking{}))
	for _, b := range []MemoryBacking{{Signalled: true}, {Held: true}, {Tainted: true}} {
		assert.False(t, Unbacked(forged, b), "%+v backs it", b)
	}
	assert.False(t, Unbacked(&v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthWaiting}, MemoryBacking{}), "Waiting is not out")
	assert.False(t, Unbacked(&v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthReleased}, MemoryBacking{}), "Released is an order's")
	assert.False(t, Unbacked(nil, MemoryBacking{}))

	// 25% of 4 is 1: one node out on a backing leaves no room; a signal comes first.
	assert.Equal(t, 1, MemoryRoom(4, 0, 0, 25))
	assert.Equal(t, 0, MemoryRoom(4, 1, 0, 25))
	assert.Equal(t, 0, MemoryRoom(4, 0, 1, 25))
	assert.Equal(t, 0, MemoryRoom(4, 0, 3, 25))
	assert.Equal(t, 2, MemoryRoom(10, 1, 1, 40))

	got, why := HonourUnbacked(forged, false, 25, t0)
	assert.Nil(t, got)
	assert.Equal(t, "the Pool's status says HeldOut (Flapping) but the node shows no signal, spec.health.hold does not name it and it carries no "+
		"runwhere.ai/quarantine taint; not honoured: the circuit breaker (spec.health.maxQuarantinedPercent 25%) is full, and status is memory, not an order", why)

	got, why = HonourUnbacked(forged, true, 25, t0)
	assert.Empty(t, why)
	require.NotNil(t, got)
	assert.Equal(t, v1alpha1.NodeHealthQuarantined, got.State, "never held out on memory")
	assert.Equal(t, ReasonUnbacked, got.Reason)
	assert.False(t, got.Fatal, "nothing drained on memory")
	assert.Empty(t, got.StressRun+got.Job, "no run or Job of the claim's")
	again, _ := HonourUnbacked(got, true, 25, t0.Add(1))
	assert.Same(t, got, again, "honoured once, then kept as it is")

	// It goes to the re-check, and its return is no flap.
	st := NextHealth(HealthInput{Entry: got, Settings: defaultSettings(), Now: t0, BreakerRoom: true})
	assert.Equal(t, v1alpha1.NodeHealthRechecking, st.Entry.State)
	assert.Equal(t, ActionRecheck, st.Action)
	assert.True(t, st.Taint)
	holding := st.Entry.DeepCopy()
	holding.State, holding.Since = v1alpha1.NodeHealthHolding, metav1.NewTime(t0)
	st = NextHealth(HealthInput{Entry: holding, Settings: defaultSettings(), Now: t0.Add(DefaultHoldTime)})
	assert.Equal(t, v1alpha1.NodeHealthHealthy, st.Entry.State)
	assert.Nil(t, st.Entry.ReturnedAt, "an episode no signal began is no flap")
}

// A HeldOut entry on a node whose taint is a quarantine's: the taint witnesses a
// quarantine, so the node is re-checked as one, neither held indefinitely nor released.
func TestWitnessedEntryTakesAnUnwitnessedHoldForAQuarantine(t *testing.T) {
	for _, reason := range []string{ReasonHeldByHand, ReasonFlapping, ReasonRecheckFailed} {
		e := &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: reason}
		got, changed := WitnessedEntry(e, taintedNode(SignalDeviceUnhealthy, nil), t0)
		require.True(t, changed, reason)
		assert.Equal(t, v1alpha1.NodeHealthQuarantined, got.State, reason)
		assert.Equal(t, ReasonUnbacked, got.Reason, reason)
		assert.Contains(t, got.Message, "is a quarantine's: re-checked as one")
		st := NextHealth(HealthInput{Entry: got, Settings: defaultSettings(), Now: t0, BreakerRoom: true})
		assert.Equal(t, v1alpha1.NodeHealthRechecking, st.Entry.State, reason)
		assert.True(t, st.Taint)
	}
}
