package kit

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// HandOver is the one stand-in mechanism of the commands that write an object
// litepool's controller reconciles and then follow it (upgrade driver, resume and
// abort; stress run):
//   - WaitForController: the command waits up to --controller-timeout for a controller
//     to answer, which it does by setting status.observedGeneration to the spec's
//     generation. That is the controller's own answer, not a guess from a Lease that a
//     controller which does not know the kind may hold.
//   - When none answers, the command stands in: it drives the object with the
//     controller's own reconciler, unless --in-cluster.
//   - TakeOver: while the command follows an object a controller drives, it reads the
//     controller's leader Lease now and then, and takes over once the controller is
//     known to have stopped, unless --in-cluster.
type HandOver struct {
	// InCluster: never drive the object from this command. InClusterSet: the flag was
	// given, true or false.
	InCluster, InClusterSet bool
	// ControllerTimeout is how long a controller has to answer.
	ControllerTimeout time.Duration
	// ControllerNamespace is litepool's own: its leader Lease, and the node work a
	// stand-in creates, are there.
	ControllerNamespace string

	kube         kubernetes.Interface
	clock        clock.PassiveClock
	leaseChecked time.Time
	toldGone     bool
}

// HandOverPoll is how often WaitForController reads the object; LeaseCheckInterval is
// how often TakeOver reads the Lease. Tests shorten them.
var (
	HandOverPoll       = 250 * time.Millisecond
	LeaseCheckInterval = 5 * time.Second
)

// AddFlags adds --in-cluster (in the command's words), --controller-timeout and
// --controller-namespace.
func (h *HandOver) AddFlags(cmd *cobra.Command, inCluster string, timeout time.Duration) {
	fl := cmd.Flags()
	fl.BoolVar(&h.InCluster, "in-cluster", false, inCluster)
	fl.DurationVar(&h.ControllerTimeout, "controller-timeout", timeout, "How long litepool's controller has to act on the object (status.observedGeneration) before this command does the work itself")
	AddControllerNamespaceFlag(fl, &h.ControllerNamespace)
}

// Complete records whether --in-cluster was given, and the clients TakeOver reads the
// Lease with.
func (h *HandOver) Complete(cmd *cobra.Command, kube kubernetes.Interface, clk clock.PassiveClock) {
	h.InClusterSet = cmd.Flags().Changed("in-cluster")
	h.kube, h.clock = kube, clk
}

// WaitForController says whether observed (a controller acted on the object's current
// spec) became true within ControllerTimeout. Errors of observed are read as "not
// yet"; the context's error comes back.
func (h *HandOver) WaitForController(ctx context.Context, observed func(context.Context) bool) (bool, error) {
	// The reads take ctx, not a context with the deadline: a client's rate limiter
	// refuses a request that might outlive its context's deadline.
	deadline := time.Now().Add(h.ControllerTimeout)
	for {
		if observed(ctx) {
			return true, nil
		}
		if !time.Now().Before(deadline) {
			return false, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(min(HandOverPoll, time.Until(deadline))):
		}
	}
}

// TakeOver is asked on every pass of a loop that follows an object a controller
// drives. It reads the Lease at most every LeaseCheckInterval, and says once that
// litepool's controller is known to have stopped (ControllerGone), with why; take is
// true then, unless --in-cluster, and the caller drives the object from then on.
func (h *HandOver) TakeOver(ctx context.Context) (take bool, why string) {
	if h.toldGone || time.Since(h.leaseChecked) < LeaseCheckInterval {
		return false, ""
	}
	h.leaseChecked = time.Now()
	gone, why := ControllerGone(ctx, h.kube, h.ControllerNamespace, h.clock.Now())
	if !gone {
		return false, ""
	}
	h.toldGone = true
	return !h.InCluster, why
}
