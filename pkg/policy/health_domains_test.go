package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func TestCheckDomainOutPercent(t *testing.T) {
	topo := &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend}
	for _, tc := range []struct {
		name    string
		health  *v1alpha1.HealthPolicy
		topo    *v1alpha1.TopologySpec
		refused string
	}{
		{name: "no health", topo: nil},
		{name: "unset", health: &v1alpha1.HealthPolicy{}},
		{name: "with topology", health: &v1alpha1.HealthPolicy{DomainOutPercent: 50}, topo: topo},
		{name: "100", health: &v1alpha1.HealthPolicy{DomainOutPercent: 100}, topo: topo},
		{name: "without topology", health: &v1alpha1.HealthPolicy{DomainOutPercent: 50}, refused: "needs domains, and pool \"p\" has no spec.topology"},
		{name: "above 100", health: &v1alpha1.HealthPolicy{DomainOutPercent: 101}, topo: topo, refused: "101 is out of range"},
		{name: "negative", health: &v1alpha1.HealthPolicy{DomainOutPercent: -1}, topo: topo, refused: "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PoolSpec{Health: tc.health, Topology: tc.topo}}
			err := CheckDomainOutPercent(p)
			verr := ValidatePool(p, nil, 0)
			if tc.refused == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.refused)
			assert.Contains(t, err.Error(), "spec.health.domainOutPercent")
			assert.Equal(t, []string{"R1"}, Rules(err))
			require.Error(t, verr, "the Pool webhook's rule refuses it too")
			assert.Contains(t, verr.Error(), "spec.health.domainOutPercent")
		})
	}
}

func TestHealthSettingsDomainRule(t *testing.T) {
	p := &v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Health: &v1alpha1.HealthPolicy{DomainOutPercent: 50},
		Topology: &v1alpha1.TopologySpec{Levels: []string{"rack"}}}}
	s := HealthSettingsOf(p)
	require.NotNil(t, s.Topology)
	assert.Equal(t, int32(50), s.DomainOutPercent)
	assert.Equal(t, "rack", s.Topology.Unit)
	p.Spec.Topology = nil
	s = HealthSettingsOf(p)
	assert.Nil(t, s.Topology, "no topology: the rule is off")
	assert.Zero(t, s.DomainOutPercent)
}

// dm is a member of domain d: "f" faulted (out on its own, counted), "o" out on its
// own but not counted (memory), "h" held with its domain before this pass (tainted), "" in service.
func dm(name, d, how string) HealthMember {
	m := HealthMember{Name: name, Domain: d}
	switch how {
	case "f":
		m.Out, m.Faulted, m.Witnessed = true, true, true
	case "o":
		m.Out = true
	case "h":
		m.WasHeld, m.Witnessed = true, true
	}
	return m
}

func TestPlanDomainHolds(t *testing.T) {
	// Two domains of 4 and four members outside any domain: 12 members.
	pool := func(a, b [4]string) []HealthMember {
		var ms []HealthMember
		for i, how := range a {
			ms = append(ms, dm("a"+string(rune('1'+i)), "A", how))
		}
		for i, how := range b {
			ms = append(ms, dm("b"+string(rune('1'+i)), "B", how))
		}
		for i := range 4 {
			ms = append(ms, dm("x"+string(rune('1'+i)), "", ""))
		}
		return ms
	}
	type want struct {
		held    map[string][]string
		refused []string
	}
	for _, tc := range []struct {
		name             string
		members          []HealthMember
		percent, breaker int32
		want             want
	}{
		{name: "below the percent", members: pool([4]string{"f", "", "", ""}, [4]string{}), percent: 50, breaker: 50},
		{name: "at the percent: held whole", members: pool([4]string{"f", "f", "", ""}, [4]string{}), percent: 50, breaker: 50,
			want: want{held: map[string][]string{"A": {"a3", "a4"}}}},
		{name: "memory does not count", members: pool([4]string{"f", "o", "", ""}, [4]string{}), percent: 50, breaker: 50},
		{name: "back below: no hold, the held return", members: pool([4]string{"f", "h", "h", ""}, [4]string{}), percent: 50, breaker: 50},
		{name: "held before: only the witnessed stay", members: pool([4]string{"f", "f", "h", ""}, [4]string{}), percent: 50, breaker: 50,
			want: want{held: map[string][]string{"A": {"a3"}}}},
		{name: "the breaker: 12*50% = 6, 4 out on their own; A fits (6), B would make 8", members: pool([4]string{"f", "f", "", ""}, [4]string{"f", "f", "", ""}), percent: 50, breaker: 50,
			want: want{held: map[string][]string{"A": {"a3", "a4"}}, refused: []string{"B"}}},
		{name: "the breaker: a domain held before keeps its place", members: pool([4]string{"f", "f", "", ""}, [4]string{"f", "f", "h", "h"}), percent: 50, breaker: 50,
			want: want{held: map[string][]string{"B": {"b3", "b4"}}, refused: []string{"A"}}},
		{name: "whole or nothing: a domain that does not fit whole is not held", members: pool([4]string{"f", "f", "", ""}, [4]string{}), percent: 50, breaker: 25,
			want: want{refused: []string{"A"}}},
		{name: "off", members: pool([4]string{"f", "f", "f", "f"}, [4]string{}), percent: 0, breaker: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holds := PlanDomainHolds(tc.members, tc.percent, tc.breaker)
			got := want{held: map[string][]string{}}
			for _, h := range holds {
				if h.Refused != "" {
					got.refused = append(got.refused, h.Domain)
					assert.Contains(t, h.Refused, "circuit breaker")
					continue
				}
				got.held[h.Domain] = h.Hold
				assert.Contains(t, h.Message, "held out whole")
			}
			if tc.want.held == nil {
				tc.want.held = map[string][]string{}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A fault recorded with the size its domain had keeps that size: moving healthy
// members out afterwards does not raise the share.
func TestPlanDomainHoldsKeepsTheSizeAtTheFault(t *testing.T) {
	ms := []HealthMember{{Name: "a1", Domain: "A", Out: true, Faulted: true, FaultSize: 4}, {Name: "a2", Domain: "A"}}
	assert.Empty(t, PlanDomainHolds(ms, 50, 100), "1 of the 4 members A had at the fault: 25%")
	ms[0].FaultSize = 2
	holds := PlanDomainHolds(ms, 50, 100)
	require.Len(t, holds, 1)
	assert.Equal(t, []string{"a2"}, holds[0].Hold)
}

func TestStickyUnbacked(t *testing.T) {
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{QuarantineTaint(ReasonUnbacked)}}}
	rewritten := &v1alpha1.NodeHealthStatus{Node: "n", State: v1alpha1.NodeHealthRechecking, Reason: SignalDeviceUnhealthy}
	assert.Equal(t, ReasonUnbacked, StickyUnbacked(rewritten, n, false).Reason, "the taint says the episode began on memory")
	assert.Equal(t, SignalDeviceUnhealthy, rewritten.Reason, "the stored entry is not changed")
	assert.Equal(t, SignalDeviceUnhealthy, StickyUnbacked(rewritten, n, true).Reason, "a signal now is the node's word")
	n.Spec.Taints = []corev1.Taint{QuarantineTaint(SignalDeviceUnhealthy)}
	assert.Equal(t, SignalDeviceUnhealthy, StickyUnbacked(rewritten, n, false).Reason)
}

func TestReleaseOfADomainHeldMemberIsRefused(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a3"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{QuarantineTaint(ReasonDomainHeldOut)}}}
	err := CheckHealthRelease(&v1alpha1.NodeHealthStatus{Node: "a3", State: v1alpha1.NodeHealthDomainOut}, n)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "held out with its domain")
	assert.Equal(t, []string{"H1"}, Rules(err))
}

func TestNodeOutNamesTheQuarantineFirst(t *testing.T) {
	n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{QuarantineTaint(SignalNotReady)}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}}
	assert.Equal(t, OutQuarantined, NodeOut(n, "p", ""), "the breaker counts what the loop took out, NotReady or not")
}
