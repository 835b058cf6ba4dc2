package interrupt

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// Only the webhook's N3 refusal for workload pods (a stale cache after a drain) is
// retried; any other answer comes back at once.
func TestRetryStaleAdmission(t *testing.T) {
	stale := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1",
		errors.New(`admission webhook "node-departures.runwhere.ai" denied the request: [N3] node "n1" cannot leave pool "p": it runs 1 workload pod(s) (ai/job-0)`))
	calls := 0
	err := RetryStaleAdmission(context.Background(), func() error {
		if calls++; calls < 3 {
			return stale
		}
		return nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 3, calls)

	calls = 0
	other := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("[N3] the pool would have 0 node(s), below its minNodes 1"))
	err = RetryStaleAdmission(context.Background(), func() error { calls++; return other })
	assert.Equal(t, other, err)
	assert.Equal(t, 1, calls, "a floor refusal is not a stale cache")

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
