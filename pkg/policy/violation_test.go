package policy

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestViolationReadsAsBeforeAndCarriesItsRule(t *testing.T) {
	err := ValidateLabel("runwhere.ai/pol", "x")
	var v *Violation
	require.True(t, errors.As(err, &v))
	assert.Equal(t, "N1", v.Rule)
	assert.Equal(t, "metadata.labels[runwhere.ai/pol]", v.Field)
	assert.Regexp(t, `^\[N1\] unknown label key "runwhere.ai/pol": keys under "runwhere.ai/" must be one of `, err.Error())
	assert.Equal(t, err.Error(), "[N1] "+v.Message)
}

func TestViolationfKeepsTheWrappedError(t *testing.T) {
	err := Violationf("U3", "unreadable annotation: %w", io.ErrUnexpectedEOF)
	assert.Equal(t, "[U3] unreadable annotation: unexpected EOF", err.Error())
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	var v *Violation
	require.True(t, errors.As(err, &v))
	assert.Equal(t, "U3", v.Rule)
	assert.Equal(t, []string{"U3"}, Rules(err))
}

func TestRulesOfAJoinedDenial(t *testing.T) {
	// A node update that adds a typo'd key and leaves a pool at its floor: N1 and N3.
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{LabelPool: "solo-pool"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"runwhere.ai/gpu_type": "A100"}}}
	cat := catalog{pools: map[string]PoolInfo{"solo-pool": {Name: "solo-pool", Object: pool("solo-pool", "", 1), Members: 1}}}
	_, err := AdmitNode(node, old, cat)
	require.Error(t, err)
	assert.Equal(t, []string{"N1", "N3"}, Rules(err))
	assert.Contains(t, err.Error(), `(node "n1")`, "the node is still named in N1's message")
	assert.Empty(t, Rules(errors.New("[P9] text that only looks like a rule")), "rules are read from types, never parsed")
	assert.Empty(t, Rules(nil))
}

// A denial's rule ids travel as status causes (with the field at fault) and are read
// back from the API server's error, never from its text.
func TestCausesRoundTripThroughAStatus(t *testing.T) {
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{LabelPool: "solo-pool"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"runwhere.ai/gpu_type": "A100"}}}
	_, err := AdmitNode(node, old, catalog{pools: map[string]PoolInfo{"solo-pool": {Name: "solo-pool", Object: pool("solo-pool", "", 1), Members: 1}}})
	require.Error(t, err)
	causes := Causes(err)
	assert.Equal(t, []metav1.StatusCause{
		{Type: CauseRule, Message: "N1", Field: "metadata.labels[runwhere.ai/gpu_type]"},
		{Type: CauseRule, Message: "N3"},
	}, causes)

	status := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403,
		Reason: metav1.StatusReasonForbidden, Message: err.Error(), Details: &metav1.StatusDetails{Causes: causes}}}
	assert.Equal(t, []string{"N1", "N3"}, RulesOfStatus(fmt.Errorf("wrapped: %w", status)))
	assert.Empty(t, RulesOfStatus(apierrors.NewForbidden(corev1.Resource("nodes"), "n1", errors.New("[N3] only text"))))
	assert.Empty(t, RulesOfStatus(errors.New("not an API error")))
}

// N3's two refusals are told apart by the reason the busy-node one carries, in process
// and through a denial's status causes; the floor's carries none.
func TestBusyNodeReason(t *testing.T) {
	busy := CheckLeave(Leave{Node: "n1", PoolName: "p", WorkloadPods: []string{"ai/job-0"}})
	var v *Violation
	require.ErrorAs(t, busy, &v)
	assert.Equal(t, ReasonBusyNode, v.Reason)
	assert.Equal(t, []metav1.StatusCause{{Type: CauseRule, Message: "N3"}, {Type: CauseReason, Message: ReasonBusyNode}}, Causes(busy))
	suffixed := withSuffix(busy, " (node \"n1\")")
	require.ErrorAs(t, suffixed, &v)
	assert.Equal(t, ReasonBusyNode, v.Reason, "a suffix keeps the reason")

	floor := CheckLeave(Leave{Node: "n1", PoolName: "p", Pool: pool("p", "", 2), NodeReady: true, ReadyRemaining: 1})
	require.Error(t, floor)
	assert.Equal(t, []metav1.StatusCause{{Type: CauseRule, Message: "N3"}}, Causes(floor))

	status := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403,
		Reason: metav1.StatusReasonForbidden, Message: busy.Error(), Details: &metav1.StatusDetails{Causes: Causes(busy)}}}
	assert.Equal(t, []string{ReasonBusyNode}, ReasonsOfStatus(fmt.Errorf("wrapped: %w", status)))
	assert.Equal(t, []string{"N3"}, RulesOfStatus(status))
	assert.Empty(t, ReasonsOfStatus(errors.New("not an API error")))
}
