package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func taintedNode(reason string, added *time.Time) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if reason != "" {
		t := QuarantineTaint(reason)
		if added != nil {
			t.TimeAdded = &metav1.Time{Time: *added}
		}
		n.Spec.Taints = []corev1.Taint{t}
	}
	return n
}

// A writer of pools/status removes or rewrites the entry of a node the loop holds out:
// the taint, which that writer cannot touch, keeps the node out.
func TestWitnessedEntryKeepsAChangedEntryOut(t *testing.T) {
	heldOut := &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: ReasonFlapping}
	for _, tc := range []struct {
		name       string
		entry      *v1alpha1.NodeHealthStatus
		taint      string
		wantReason string // "": the entry stands
	}{
		{"no taint: the entry stands", &v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthHealthy}, "", ""},
		{"held out, and says so", heldOut, ReasonFlapping, ""},
		{"quarantined, and says so", &v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthRechecking, Reason: SignalDeviceUnhealthy}, SignalDeviceUnhealthy, ""},
		{"entry removed", nil, ReasonFlapping, ReasonFlapping},
		{"entry says Healthy", &v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthHealthy}, ReasonRecheckFailed, ReasonRecheckFailed},
		{"entry says Released", &v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthReleased}, ReasonFlapping, ReasonFlapping},
		{"entry moved on to Holding", &v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthHolding, Reason: ReasonRecovered}, ReasonFlapping, ReasonFlapping},
		{"entry's reason changed to a hold by hand", &v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthHeldOut, Reason: ReasonHeldByHand}, ReasonFlapping, ReasonFlapping},
		{"quarantined node, entry removed", nil, SignalDeviceUnhealthy, ReasonUnaccounted},
		{"quarantined node, entry says Released", &v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthReleased}, SignalDeviceUnhealthy, ReasonUnaccounted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := WitnessedEntry(tc.entry, taintedNode(tc.taint, nil), t0)
			if tc.wantReason == "" {
				assert.False(t, changed)
				assert.Same(t, tc.entry, got)
				return
			}
			require.True(t, changed)
			assert.Equal(t, v1alpha1.NodeHealthHeldOut, got.State)
			assert.Equal(t, tc.wantReason, got.Reason)
			assert.Contains(t, got.Message, "held out until released by hand")
			st := NextHealth(HealthInput{Entry: got, Settings: defaultSettings(), Now: t0})
			assert.True(t, st.Taint, "stays out")
		})
	}
}

func TestHealthOrders(t *testing.T) {
	out := t0.Add(-time.Hour)
	quarantined := &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: ReasonFlapping, Since: metav1.NewTime(out)}
	for _, tc := range []struct {
		name      string
		h         v1alpha1.HealthPolicy
		entry     *v1alpha1.NodeHealthStatus
		taint     string
		taintedAt *time.Time
		want      v1alpha1.NodeHealthState // "": unchanged
		wantBy    string
	}{
		{name: "no order", entry: quarantined, taint: ReasonFlapping},
		{name: "a hold holds a healthy node out", h: v1alpha1.HealthPolicy{Hold: []v1alpha1.NodeHold{{Node: "n1", By: "bob", Reason: "fan"}}},
			want: v1alpha1.NodeHealthHeldOut, wantBy: "bob"},
		{name: "a release after the quarantine began returns it", h: v1alpha1.HealthPolicy{Release: []v1alpha1.NodeRelease{{Node: "n1", By: "alice", At: metav1.NewTime(t0)}}},
			entry: quarantined, taint: ReasonFlapping, taintedAt: &out, want: v1alpha1.NodeHealthReleased, wantBy: "alice"},
		{name: "a release older than the quarantine does nothing", h: v1alpha1.HealthPolicy{Release: []v1alpha1.NodeRelease{{Node: "n1", At: metav1.NewTime(out.Add(-time.Minute))}}},
			entry: quarantined, taint: ReasonFlapping, taintedAt: &out},
		// The taint's time decides, not the entry's, which a pools/status writer may
		// set back to make an old release apply.
		{name: "an old release and an entry dated back", h: v1alpha1.HealthPolicy{Release: []v1alpha1.NodeRelease{{Node: "n1", At: metav1.NewTime(out.Add(-time.Minute))}}},
			entry: &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: ReasonFlapping, Since: metav1.NewTime(out.Add(-48 * time.Hour)), FaultedAt: &metav1.Time{Time: out.Add(-48 * time.Hour)}},
			taint: ReasonFlapping, taintedAt: &out},
		{name: "a release of a node that is not out does nothing", h: v1alpha1.HealthPolicy{Release: []v1alpha1.NodeRelease{{Node: "n1", At: metav1.NewTime(t0)}}}},
		{name: "a hold taken out of spec releases the node", entry: &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: ReasonHeldByHand},
			taint: ReasonHeldByHand, want: v1alpha1.NodeHealthReleased},
		{name: "an entry rewritten as held by hand, with no hold, is not released", entry: &v1alpha1.NodeHealthStatus{Node: "n1", State: v1alpha1.NodeHealthHeldOut, Reason: ReasonHeldByHand},
			taint: SignalDeviceUnhealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := HealthOrders(&tc.h, tc.entry, taintedNode(tc.taint, tc.taintedAt), t0)
			if tc.want == "" {
				assert.False(t, changed)
				assert.Same(t, tc.entry, got)
				return
			}
			require.True(t, changed)
			assert.Equal(t, tc.want, got.State)
			assert.Equal(t, tc.wantBy, got.By)
			if tc.want == v1alpha1.NodeHealthReleased {
				st := NextHealth(HealthInput{Entry: got, Settings: defaultSettings(), Now: t0})
				assert.Equal(t, v1alpha1.NodeHealthHealthy, st.Entry.State)
				assert.False(t, st.Taint)
			}
		})
	}
}

func TestCheckHealthRelease(t *testing.T) {
	err := CheckHealthRelease(&v1alpha1.NodeHealthStatus{State: v1alpha1.NodeHealthWaiting}, taintedNode("", nil))
	var v *Violation
	require.True(t, errors.As(err, &v))
	assert.Equal(t, "H1", v.Rule)
	assert.Contains(t, err.Error(), "node n1 is Waiting: only a node the health loop holds out")
	require.Error(t, CheckHealthRelease(nil, taintedNode("", nil)))
	assert.NoError(t, CheckHealthRelease(nil, taintedNode(ReasonFlapping, nil)), "a tainted node can be released")
}
