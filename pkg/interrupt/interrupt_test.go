package interrupt

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestLeftovers(t *testing.T) {
	l := &Leftovers{}
	assert.Empty(t, l.Describe())
	l.Set(func() string { return "node n1 left cordoned" })
	assert.Equal(t, "node n1 left cordoned", l.Describe())
	l.Clear()
	assert.Empty(t, l.Describe())
}

// A put-back runs on a context the interruption did not cancel.
func TestRollbackContextOutlivesTheCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rb, done := RollbackContext(ctx)
	defer done()
	assert.NoError(t, rb.Err())
	_, hasDeadline := rb.Deadline()
	assert.True(t, hasDeadline, "but it is bounded")
}

func TestStoppedBecause(t *testing.T) {
	cause := errors.New("eviction refused")
	assert.Equal(t, cause, StoppedBecause(context.Background(), cause))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Equal(t, "interrupted (SIGINT/SIGTERM)", StoppedBecause(ctx, cause))
	assert.Equal(t, "interrupted (SIGINT/SIGTERM)", StoppedBecause(context.Background(), context.Canceled))
}

// denial is a request the webhook denied for err, as the API server returns it: the
// message, and the causes the webhook writes (policy.Causes).
func denial(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: `admission webhook "node-departures.runwhere.ai" denied the request: ` + err.Error(),
		Details: &metav1.StatusDetails{Causes: policy.Causes(err)}}}
}

// Only the webhook's N3 refusal for workload pods (a stale cache after a drain) is
// retried, told by its reason among the causes; any other answer comes back at once.
func TestRetryStaleAdmission(t *testing.T) {
	busy := policy.CheckLeave(policy.Leave{Node: "n1", PoolName: "p", WorkloadPods: []string{"ai/job-0"}})
	stale := denial(busy)
	calls := 0
	err := RetryStaleAdmission(context.Background(), func() error {
		if calls++; calls < 3 {
			return stale
		}
		return nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 3, calls)

	floor := policy.Violationf("N3", "node %q cannot leave pool %q: it runs 1 workload pod(s) says this text, but no reason does", "n1", "p")
	textOnly := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: busy.Error()}}
	for _, other := range []error{
		denial(floor), // an N3 without the busy-node reason (the floor) is not a stale cache, whatever its text
		textOnly,      // no causes: not ours, though the text reads like it
		apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("RBAC: not allowed")), // nothing to do with N3
	} {
		calls = 0
		err = RetryStaleAdmission(context.Background(), func() error { calls++; return other })
		assert.Equal(t, other, err)
		assert.Equal(t, 1, calls, "%v", other)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	err = RetryStaleAdmission(ctx, func() error { calls++; return stale })
	assert.Equal(t, stale, err)
	assert.Equal(t, 1, calls, "an interrupted command stops retrying")
}

func TestShellQuote(t *testing.T) {
	assert.Equal(t, "train-a100", shellQuote("train-a100"))
	assert.Equal(t, "'a b'", shellQuote("a b"))
	assert.Equal(t, `'it'\''s'`, shellQuote("it's"))
	assert.Equal(t, "''", shellQuote(""))
}

func TestOrNothingChanged(t *testing.T) {
	assert.Equal(t, "nothing had changed", OrNothingChanged(nil))
	assert.Equal(t, "n1 (uncordoned), n2", OrNothingChanged([]string{"n1 (uncordoned)", "n2"}))
}
