package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Violation is a rule's refusal: the rule's id (P3, N1, ...), the field at fault when
// one is (a label key, a flag), the reason when a client must tell one of the rule's
// checks from another, and the message. Users read Error(), "[P3] message", as before;
// code reads the rule and the reason with errors.As, Rules or RulesOfStatus and
// ReasonsOfStatus, never by parsing the text.
type Violation struct {
	Rule    string
	Field   string
	Reason  string
	Message string
}

// ReasonBusyNode is N3 refusing a node that runs workload pods (not one that would take
// its pool below minNodes): after a drain, a webhook whose cache has not yet seen the
// pods go gives it for a while, so a client may retry it.
const ReasonBusyNode = "BusyNode"

func (v *Violation) Error() string { return "[" + v.Rule + "] " + v.Message }

// Violationf is a Violation of rule whose message is format with args. A %w in format
// keeps the wrapped error reachable (errors.Is, errors.As).
func Violationf(rule, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	v := &Violation{Rule: rule, Message: err.Error()}
	if errors.Unwrap(err) != nil {
		return &wrappedViolation{Violation: v, cause: errors.Unwrap(err)}
	}
	return v
}

// reasonViolationf is Violationf naming the reason.
func reasonViolationf(rule, reason, format string, args ...any) error {
	return &Violation{Rule: rule, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// fieldViolationf is Violationf naming the field at fault.
func fieldViolationf(rule, field, format string, args ...any) error {
	return &Violation{Rule: rule, Field: field, Message: fmt.Sprintf(format, args...)}
}

// wrappedViolation is a Violation that wraps the error it was made from.
type wrappedViolation struct {
	*Violation
	cause error
}

func (w *wrappedViolation) Unwrap() []error { return []error{w.Violation, w.cause} }

// Rules lists the ids of the rules err violates (it may join several), in order, each
// once. An error that is no violation gives none.
func Rules(err error) []string {
	var ids []string
	eachViolation(err, func(v *Violation) {
		if !slices.Contains(ids, v.Rule) {
			ids = append(ids, v.Rule)
		}
	})
	return ids
}

// eachViolation calls fn with every violation err holds, in order.
func eachViolation(err error, fn func(*Violation)) {
	switch e := err.(type) {
	case nil:
	case *Violation:
		fn(e)
	case *wrappedViolation:
		fn(e.Violation)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			eachViolation(inner, fn)
		}
	case interface{ Unwrap() error }:
		eachViolation(e.Unwrap(), fn)
	}
}

// CauseRule is the type of the StatusCause a denial by litepool-webhook carries for each
// rule it violates: the cause's Message is the rule id ("N3"), its Field the field at
// fault. Clients read rule ids from it (RulesOfStatus), not from the message text.
const CauseRule metav1.CauseType = "runwhere.ai/rule"

// CauseReason is the type of the StatusCause that follows a rule's cause when the
// violation has a reason (ReasonBusyNode): the cause's Message is the reason.
const CauseReason metav1.CauseType = "runwhere.ai/reason"

// Causes are the StatusCauses of err's violations, one per rule and field, each
// followed by its reason's when it has one, in order.
func Causes(err error) []metav1.StatusCause {
	var out []metav1.StatusCause
	seen := map[metav1.StatusCause]bool{}
	add := func(c metav1.StatusCause) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	eachViolation(err, func(v *Violation) {
		add(metav1.StatusCause{Type: CauseRule, Message: v.Rule, Field: v.Field})
		if v.Reason != "" {
			add(metav1.StatusCause{Type: CauseReason, Message: v.Reason, Field: v.Field})
		}
	})
	return out
}

// RulesOfStatus lists the rule ids an API server's error carries in its status causes
// (a request litepool-webhook denied), each once.
func RulesOfStatus(err error) []string { return causesOfStatus(err, CauseRule) }

// ReasonsOfStatus lists the reasons an API server's error carries in its status causes,
// each once.
func ReasonsOfStatus(err error) []string { return causesOfStatus(err, CauseReason) }

func causesOfStatus(err error, typ metav1.CauseType) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		if c.Type == typ && !slices.Contains(out, c.Message) {
			out = append(out, c.Message)
		}
	}
	return out
}

// messageOf is err's message without its rule id, for a violation nested in another.
func messageOf(err error) string {
	var v *Violation
	if errors.As(err, &v) {
		return strings.TrimPrefix(err.Error(), "["+v.Rule+"] ")
	}
	return err.Error()
}

// withSuffix is err with suffix added to its message, still the same rule's violation.
func withSuffix(err error, suffix string) error {
	var v *Violation
	if errors.As(err, &v) && v.Error() == err.Error() {
		return &Violation{Rule: v.Rule, Field: v.Field, Reason: v.Reason, Message: v.Message + suffix}
	}
	return fmt.Errorf("%w%s", err, suffix)
}
