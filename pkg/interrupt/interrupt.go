// Package interrupt is how a long operation stops cleanly: the first SIGINT or SIGTERM
// cancels its context, and it puts back what it changed on a context of its own
// (RollbackContext); while it works it registers what a second signal would leave
// half-done (InFlight), with the commands that resume or undo it. The commands
// (pkg/plugin) and the workflows they run (pkg/scale, pkg/poolcreate) share it.
package interrupt

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runwhere-ai/litepool/pkg/policy"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// rollbackTimeout bounds a put-back that runs after the command was interrupted.
const rollbackTimeout = time.Minute

// Leftovers is what the running command has changed and not yet finished or put back:
// a function that describes it, with the commands to resume or undo it.
type Leftovers struct {
	mu   sync.Mutex
	text func() string
}

// InFlight is the running command's Leftovers (one command runs per process).
var InFlight = &Leftovers{}

// Set registers the description; clear removes it once nothing is left half-done.
func (l *Leftovers) Set(text func() string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text = text
}

func (l *Leftovers) Clear() { l.Set(nil) }

func (l *Leftovers) Describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.text == nil {
		return ""
	}
	return l.text()
}

// RollbackContext is the context of a put-back: not cancelled with the command's (an
// interrupted command must still put back), but bounded.
func RollbackContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
}

// StoppedBecause names the cause of a stop: an interruption when the command's context
// was cancelled (the drain library reports that in words of its own), else the error.
func StoppedBecause(ctx context.Context, cause error) any {
	if errors.Is(ctx.Err(), context.Canceled) || errors.Is(cause, context.Canceled) {
		return "interrupted (SIGINT/SIGTERM)"
	}
	return cause
}

// staleAdmissionRetries paces and bounds the retries of a write refused for pods that
// are already gone: every 250ms, 20 times, so 5s at most. A count, not a deadline, so
// that no wall-clock reading decides when to stop.
var staleAdmissionRetries = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 1, Steps: 20}

// RetryStaleAdmission runs write, and again while the webhook refuses it under rule N3
// for workload pods on the node: after a drain the pods are gone from the API server,
// but the webhook answers from an informer cache that may not have seen them go yet.
// Any other answer, the last one once the retries are spent, or the last one when ctx
// ends, is returned.
func RetryStaleAdmission(ctx context.Context, write func() error) error {
	backoff := staleAdmissionRetries
	err := write()
	for isStalePodsDenial(err) && backoff.Steps > 0 {
		t := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		err = write()
	}
	return err
}

// isStalePodsDenial: the webhook's N3 for workload pods on the node (its reason
// ReasonBusyNode), not for the pool's floor; both read from the denial's status causes.
func isStalePodsDenial(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && slices.Contains(policy.RulesOfStatus(err), "N3") &&
		slices.Contains(policy.ReasonsOfStatus(err), policy.ReasonBusyNode)
}

// CommandLine is the command as the user ran it, to repeat it to resume.
func CommandLine() string {
	args := make([]string, 0, len(os.Args))
	for _, a := range os.Args[1:] {
		args = append(args, shellQuote(a))
	}
	return "kubectl litepool " + strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// OrNothingChanged lists what a stopped operation had changed or put back, for its
// message; "nothing had changed" when it is nothing.
func OrNothingChanged(items []string) string {
	if len(items) == 0 {
		return "nothing had changed"
	}
	return strings.Join(items, ", ")
}
