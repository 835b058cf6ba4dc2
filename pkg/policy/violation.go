package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Violation is a rule's refusal: the rule's id (P3, N1, ...), the field at fault when
// one is (a label key, a flag), and the message. Users read Error(), "[P3] message", as
// before; code reads the rule with errors.As or Rules, never by parsing the text.
type Violation struct {
	Rule    string
	Field   string
	Message string
}

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
	seen := map[string]bool{}
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *Violation:
			if !seen[e.Rule] {
				seen[e.Rule] = true
				ids = append(ids, e.Rule)
			}
		case *wrappedViolation:
			walk(e.Violation)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return ids
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
		return &Violation{Rule: v.Rule, Field: v.Field, Message: v.Message + suffix}
	}
	return fmt.Errorf("%w%s", err, suffix)
}
