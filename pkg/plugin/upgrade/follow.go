package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// rolloutClientFor builds the client the commands read and write DriverRollouts with;
// unit tests replace it with a fake.
var rolloutClientFor = kit.ObjectClient

// followInterval is how often a followed rollout is read again.
var followInterval = time.Second

// FollowFlags are the flags of the commands that start or change a rollout and then
// follow it (driver, resume, abort).
type FollowFlags struct {
	// Wait follows the rollout until it ends (Succeeded, Failed, Aborted, Paused, or
	// stalled).
	Wait bool
	// Watch prints a line whenever a node or the rollout moves.
	Watch bool
	// HandOver decides whether the controller or this command drives the rollout
	// (--in-cluster: only a controller does; --in-cluster=false is the default). The
	// command stands in with installer Jobs in ControllerNamespace.
	kit.HandOver
}

func (f *FollowFlags) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.Wait, "wait", true, "Follow the rollout until it succeeds, fails, is aborted or paused, or stalls")
	fl.BoolVarP(&f.Watch, "watch", "w", false, "While following, print a line whenever a node or the rollout moves")
	f.HandOver.AddFlags(cmd, "Never drive the rollout from this command: leave it to litepool's controller, even when none acts on it", 10*time.Second)
}

// follower follows one rollout and, when no controller acts on it, drives it with the
// controller's own reconciler.
type follower struct {
	FollowFlags
	c        client.Client
	kube     kubernetes.Interface
	recorder *events.Recorder
	clock    clock.PassiveClock
	out      io.Writer // progress lines
	errOut   io.Writer
}

// follow follows the rollout name after a change of its spec (creation included). The
// error says why a rollout did not succeed (failed, stalled); an aborted or paused
// rollout is not an error.
func (f *follower) follow(ctx context.Context, name string) error {
	if _, err := f.get(ctx, name); err != nil {
		return err
	}
	local := false
	taken, err := f.WaitForController(ctx, func(ctx context.Context) bool {
		ro, err := f.get(ctx, name)
		return err == nil && observed(ro)
	})
	if !taken {
		switch {
		case err != nil:
			return err
		case f.InCluster:
			fmt.Fprintf(f.errOut, "driverrollout %s: no controller has acted on it within %s; it waits for one (--in-cluster)\n", name, f.ControllerTimeout)
		case !f.Wait:
			fmt.Fprintf(f.errOut, "driverrollout %s: no controller has acted on it within %s; nothing drives it until one runs, or `kubectl litepool upgrade resume %s` drives it from there\n", name, f.ControllerTimeout, name)
			return nil
		default:
			local = true
			fmt.Fprintf(f.errOut, "driverrollout %s: no litepool controller acted on it within %s: this command drives it, with the controller's reconciler; "+
				"stopping the command leaves the rollout where it is, and `kubectl litepool upgrade resume %s` continues it\n", name, f.ControllerTimeout, name)
		}
	} else if !f.Wait {
		fmt.Fprintf(f.out, "driverrollout %s: litepool's controller drives it; follow it with `kubectl litepool upgrade status %s -w`\n", name, name)
		return nil
	}
	interrupt.InFlight.Set(func() string {
		if local {
			return fmt.Sprintf("driverrollout %s is no longer driven by this command; each node keeps its state in the rollout's status. Continue it:\n  kubectl litepool upgrade resume %s\nOr stop it:\n  kubectl litepool upgrade abort %s", name, name, name)
		}
		return fmt.Sprintf("driverrollout %s goes on in the cluster; follow it with `kubectl litepool upgrade status %s -w`", name, name)
	})
	defer interrupt.InFlight.Clear()
	rec := &upgrade.Reconciler{Client: f.c, Kube: f.kube, Recorder: f.recorder, Namespace: f.ControllerNamespace, StandIn: true}
	p := newProgress(f.out, f.Watch)
	for {
		// A controller that acted on the rollout and then stopped (killed, no other
		// replica) would leave this loop following a rollout nothing drives.
		if !local {
			local = f.takeOver(ctx, name)
		}
		next := followInterval
		if local {
			res, err := rec.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
			switch {
			case ctx.Err() != nil, apierrors.IsConflict(err):
			case err != nil:
				fmt.Fprintf(f.errOut, "driverrollout %s: %v (trying again)\n", name, err)
			case res.RequeueAfter > 0 && res.RequeueAfter < next:
				next = res.RequeueAfter
			}
		}
		ro, err := f.get(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return f.interrupted(name, local, ctx.Err())
			}
			return err
		}
		p.show(ro)
		if done, err := ended(ro, local); done {
			fmt.Fprintln(f.out, summary(ro))
			return err
		}
		select {
		case <-ctx.Done():
			return f.interrupted(name, local, ctx.Err())
		case <-time.After(next):
		}
	}
}

// takeOver says whether this command drives the rollout from now on: litepool's
// controller is known to have stopped (HandOver.TakeOver) and the command follows to
// the end without --in-cluster. It tells the user either way, once.
func (f *follower) takeOver(ctx context.Context, name string) bool {
	take, why := f.TakeOver(ctx)
	if why == "" {
		return false
	}
	if !take {
		fmt.Fprintf(f.errOut, "driverrollout %s: %s; it waits for one (--in-cluster)\n", name, why)
		return false
	}
	fmt.Fprintf(f.errOut, "driverrollout %s: %s: this command drives it from here, with the controller's reconciler; "+
		"stopping the command leaves the rollout where it is, and `kubectl litepool upgrade resume %s` continues it\n", name, why, name)
	return true
}

func (f *follower) interrupted(name string, local bool, err error) error {
	if local {
		return fmt.Errorf("stopped driving driverrollout %s; `kubectl litepool upgrade resume %s` continues it: %w", name, name, err)
	}
	return fmt.Errorf("stopped following driverrollout %s; it goes on in the cluster: %w", name, err)
}

func (f *follower) get(ctx context.Context, name string) (*v1alpha1.DriverRollout, error) {
	var ro v1alpha1.DriverRollout
	if err := f.c.Get(ctx, client.ObjectKey{Name: name}, &ro); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("driverrollout %s is gone (deleted?)", name)
		}
		return nil, noCRD(err)
	}
	return &ro, nil
}

// ended says whether following is over, and the error of a rollout that did not
// succeed. Followed in the cluster, only a status that answers the current spec counts;
// driving it here, this process's last pass does.
func ended(ro *v1alpha1.DriverRollout, local bool) (bool, error) {
	if !local && !observed(ro) {
		return false, nil
	}
	switch ro.Status.Phase {
	case v1alpha1.RolloutSucceeded, v1alpha1.RolloutAborted, v1alpha1.RolloutPaused:
		return true, nil
	case v1alpha1.RolloutFailed:
		return true, fmt.Errorf("driverrollout %s failed: %s", ro.Name, ro.Status.Message)
	}
	if c := meta.FindStatusCondition(ro.Status.Conditions, upgrade.ConditionComplete); c != nil && c.Reason == upgrade.ReasonStalled {
		return true, errors.New(c.Message)
	}
	return false, nil
}

// observed says whether a reconciler has acted on the rollout's current spec.
func observed(ro *v1alpha1.DriverRollout) bool {
	return ro.Status.ObservedGeneration > 0 && ro.Status.ObservedGeneration >= ro.Generation
}

// summary is a rollout's line: its phase, counts and message.
func summary(ro *v1alpha1.DriverRollout) string {
	return fmt.Sprintf("driverrollout %s: %s: %s", ro.Name, orPending(ro.Status.Phase), ro.Status.Message)
}

func orPending(p v1alpha1.DriverRolloutPhase) v1alpha1.DriverRolloutPhase {
	if p == "" {
		return v1alpha1.RolloutPending
	}
	return p
}

// progressLine is a rollout's counts.
func progressLine(ro *v1alpha1.DriverRollout) string {
	c := upgrade.CountsOf(ro)
	pct := 0
	if c.Total > 0 {
		pct = c.Done * 100 / c.Total
	}
	scope := "nodes " + strings.Join(ro.Spec.Nodes, ",")
	if ro.Spec.Pool != "" {
		scope = "pool " + ro.Spec.Pool
	}
	return fmt.Sprintf("driverrollout %s (%s → %s): %s: %d/%d done (%d%%), %d in progress, %d pending, %d failed",
		ro.Name, scope, ro.Spec.Version, orPending(ro.Status.Phase), c.Done, c.Total, pct, c.InProgress, c.Pending, c.Failed)
}

// progress prints what moved since it last looked (under --watch): one line per node
// whose state or message changed, then the rollout's counts when they changed.
type progress struct {
	out   io.Writer
	on    bool
	nodes map[string]string
	last  string
}

func newProgress(out io.Writer, on bool) *progress {
	return &progress{out: out, on: on, nodes: map[string]string{}}
}

func (p *progress) show(ro *v1alpha1.DriverRollout) {
	if !p.on {
		return
	}
	nodes := append([]v1alpha1.DriverRolloutNode(nil), ro.Status.Nodes...)
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		line := fmt.Sprintf("node/%s: %s", n.Name, n.State)
		if n.Message != "" {
			line += ": " + n.Message
		}
		if p.nodes[n.Name] != line {
			fmt.Fprintln(p.out, line)
			p.nodes[n.Name] = line
		}
	}
	if line := progressLine(ro); line != p.last {
		fmt.Fprintln(p.out, line)
		p.last = line
	}
}

// noCRD explains a cluster without the DriverRollout resource.
func noCRD(err error) error {
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("the DriverRollout resource (driverrollouts.runwhere.ai) is not installed in this cluster: install litepool with `kubectl apply -k deploy/webhook` (or `kubectl apply -f deploy/webhook/crd`): %w", err)
	}
	return err
}

// sleep waits followInterval, or until ctx is done.
func sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(followInterval):
		return nil
	}
}
