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

// Only the webhook's N3 refusal for workload pods (a stale cache after a drain) is
// retried; any other answer comes back at once.
// denial is a request the webhook denied, as the API server returns it: the message,
// and the rule ids as status causes.
func denial(message string, rules ...string) error {
	st := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: `admission webhook "node-departures.runwhere.ai" denied the request: ` + message, Details: &metav1.StatusDetails{}}
	for _, r := range rules {
		st.Details.Causes = append(st.Details.Causes, metav1.StatusCause{Type: policy.CauseRule, Message: r})
	}
	return &apierrors.StatusError{ErrStatus: st}
}

func TestRetryStaleAdmission(t *testing.T) {
	stale := denial(`[N3] node "n1" cannot leave pool "p": it runs 1 workload pod(s) (ai/job-0)`, "N3")
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
	for _, other := range []error{
		denial("[N3] the pool would have 0 node(s), below its minNodes 1", "N3"),                               // a floor refusal is not a stale cache
		denial(`[N3] node "n1" cannot leave pool "p": it runs 1 workload pod(s) (ai/job-0)`),                   // no rule in the causes: not ours
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
