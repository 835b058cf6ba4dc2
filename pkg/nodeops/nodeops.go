// Package nodeops cordons and uncordons nodes for every litepool operation (with
// cordon holders, so that one operation's uncordon never lifts another's cordon), and
// is litepool's one drain, on top of k8s.io/kubectl/pkg/drain so that PDBs, DaemonSets,
// emptyDir data and unmanaged pods behave as in `kubectl drain`, with one pod filter
// added everywhere (NodeWorkFilter: litepool's node work stays). The plugin's commands
// (cordon/drain, scale-down) wait for it (Drain, with kubectl's timeout); the
// controllers (driver rollouts, the health loop) take one non-blocking pass at a time
// (DrainStep) and come back.
package nodeops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Cordon cordons a node for the litepool operation holder. The first time the operation
// takes the node it records, in its own annotation, whether the node was cordoned
// before litepool (policy.ApplyCordon), so that Uncordon leaves a node someone else
// cordoned, or another operation still holds, as it found it.
func Cordon(ctx context.Context, client kubernetes.Interface, holder policy.CordonHolder, name string, dryRun cmdutil.DryRunStrategy) (*corev1.Node, error) {
	node, _, err := ModifyNode(ctx, client, name, dryRun, func(n *corev1.Node) error {
		policy.ApplyCordon(holder, n)
		return nil
	})
	return node, err
}

// Uncordon lets a node go for operation holder (policy.ApplyRelease): it forgets its
// memory and makes the node schedulable unless the node was cordoned before or another
// operation still holds it. It reports whether the node stays cordoned and the
// operations still holding it.
func Uncordon(ctx context.Context, client kubernetes.Interface, holder policy.CordonHolder, name string, dryRun cmdutil.DryRunStrategy) (stayedCordoned bool, heldBy []string, err error) {
	_, _, err = ModifyNode(ctx, client, name, dryRun, func(n *corev1.Node) error {
		heldBy, stayedCordoned = policy.ApplyRelease(holder, n)
		return nil
	})
	return stayedCordoned, heldBy, err
}

// ForceUncordon makes a node schedulable whatever its history (the `uncordon` command:
// an operator's explicit word).
func ForceUncordon(ctx context.Context, client kubernetes.Interface, name string, dryRun cmdutil.DryRunStrategy) (*corev1.Node, error) {
	node, _, err := ModifyNode(ctx, client, name, dryRun, func(n *corev1.Node) error {
		policy.ApplyOperatorUncordon(n)
		return nil
	})
	return node, err
}

// OperatorCordon marks a node unschedulable on an operator's explicit word (the cordon
// and drain commands). It records nothing for itself, but every litepool operation
// that holds the node now remembers it as cordoned, so none uncordons it when it ends.
func OperatorCordon(ctx context.Context, client kubernetes.Interface, name string, dryRun cmdutil.DryRunStrategy) (*corev1.Node, error) {
	node, _, err := ModifyNode(ctx, client, name, dryRun, func(n *corev1.Node) error {
		policy.ApplyOperatorCordon(n)
		return nil
	})
	return node, err
}

// RetryOnConflict is client-go's retry.RetryOnConflict, except that it returns fn's
// error when fn fails with an error wrapping a context cancellation or deadline:
// client-go's returns the last conflict for those (nil when there was none), so a write
// interrupted by Ctrl-C would look like a success.
func RetryOnConflict(fn func() error) error {
	var last error
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		last = fn()
		return last
	})
	if last != nil {
		return last
	}
	return err
}

// ModifyNode reads a node, lets change modify it and writes it back when anything
// changed, under optimistic concurrency (the update carries the resourceVersion read; a
// conflict reads again). It returns the node as written (under client dry run, as it
// would have been, unsent) and whether change changed anything.
func ModifyNode(ctx context.Context, client kubernetes.Interface, name string, dryRun cmdutil.DryRunStrategy, change func(*corev1.Node) error) (*corev1.Node, bool, error) {
	var out *corev1.Node
	var changed bool
	err := RetryOnConflict(func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		updated := node.DeepCopy()
		if err := change(updated); err != nil {
			return err
		}
		out = updated
		changed = !apiequality.Semantic.DeepEqual(node, updated)
		if !changed || dryRun == cmdutil.DryRunClient {
			return nil
		}
		opts := metav1.UpdateOptions{DryRun: ServerDryRun(dryRun)}
		out, err = client.CoreV1().Nodes().Update(ctx, updated, opts)
		return err
	})
	return out, changed, err
}

// ServerDryRun is the DryRun field of a write's options under a dry-run strategy:
// dryRun=All under --dry-run=server, nothing otherwise (a client dry run sends no write).
func ServerDryRun(s cmdutil.DryRunStrategy) []string {
	if s == cmdutil.DryRunServer {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// DrainOptions are `kubectl drain`'s knobs.
type DrainOptions struct {
	Timeout            time.Duration // 0: no limit
	GracePeriodSeconds int           // negative: the pod's own
	IgnoreDaemonSets   bool
	DeleteEmptyDirData bool
	Force              bool
	DisableEviction    bool
	PodSelector        string
	// Namespace is litepool's own (DefaultNamespace when empty): its node work there is
	// never drained (NodeWorkFilter), as in the controllers' drains.
	Namespace   string
	DryRun      cmdutil.DryRunStrategy
	Out, ErrOut io.Writer
}

// filters are what every litepool drain adds to kubectl's.
func (o DrainOptions) filters() []drain.PodFilter {
	ns := o.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return []drain.PodFilter{NodeWorkFilter(ns)}
}

// serverDryRunTimeout bounds a server dry-run drain.
const serverDryRunTimeout = 2 * time.Second

// BlockedError is a drain that stopped because pods could not be evicted in time
// (usually a PodDisruptionBudget): it names them.
type BlockedError struct {
	Node    string
	Pods    []string // namespace/name, sorted
	Reasons []string // the API server's last answer per pod
	Err     error
}

func (e *BlockedError) Error() string {
	reason := "they were not evicted in time"
	if len(e.Reasons) > 0 {
		reason = strings.Join(e.Reasons, "; ")
	}
	return fmt.Sprintf("drain of node %q stopped: %d pod(s) could not be evicted (%s): %s; wait until the PodDisruptionBudget allows it, scale the workload up, or raise --timeout",
		e.Node, len(e.Pods), strings.Join(e.Pods, ", "), reason)
}

func (e *BlockedError) Unwrap() error { return e.Err }

// Drain evicts the node's pods (the node should be cordoned first). While it runs the
// node carries runwhere.ai/draining, so listings show it as Draining. An eviction a PDB
// refuses is retried until Timeout; then Drain fails with a *BlockedError naming the
// pods that did not leave.
func Drain(ctx context.Context, client kubernetes.Interface, name string, o DrainOptions) error {
	if o.DryRun != cmdutil.DryRunClient {
		if _, err := patchNode(ctx, client, name, nil, map[string]*string{policy.AnnotationDraining: ptr.To("true")}, o.DryRun); err != nil {
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute) // also after an interruption
			defer cancel()
			_, _ = patchNode(ctx, client, name, nil, map[string]*string{policy.AnnotationDraining: nil}, o.DryRun)
		}()
	}
	if o.DryRun == cmdutil.DryRunServer && (o.Timeout == 0 || o.Timeout > serverDryRunTimeout) {
		// A dry run changes nothing, so an eviction a PDB refuses now stays refused:
		// report it rather than retry until a timeout that may be infinite.
		o.Timeout = serverDryRunTimeout
	}
	tracker := newEvictionTracker(orDiscard(o.ErrOut))
	helper := &drain.Helper{
		Ctx: ctx, Client: client, Force: o.Force, GracePeriodSeconds: o.GracePeriodSeconds,
		IgnoreAllDaemonSets: o.IgnoreDaemonSets, Timeout: o.Timeout, DeleteEmptyDirData: o.DeleteEmptyDirData,
		PodSelector: o.PodSelector, DisableEviction: o.DisableEviction, DryRunStrategy: o.DryRun,
		EvictErrorRetryDelay: 500 * time.Millisecond, AdditionalFilters: o.filters(),
		Out: &onceWriter{out: orDiscard(o.Out), seen: map[string]bool{}}, ErrOut: tracker,
		OnPodDeletionOrEvictionStarted: func(pod *corev1.Pod, _ bool) { tracker.started(pod) },
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, eviction bool, err error) {
			if err != nil {
				return
			}
			tracker.finished(pod)
			if o.Out != nil {
				verb := "evicted"
				if !eviction {
					verb = "deleted"
				}
				fmt.Fprintf(o.Out, "pod/%s %s\n", pod.Name, verb)
			}
		},
	}
	if o.DryRun == cmdutil.DryRunClient {
		// The helper has no client dry run (kubectl's command handles it before calling
		// it): list what would go and stop there.
		return listForDrain(helper, name, orDiscard(o.Out))
	}
	if err := drain.RunNodeDrain(helper, name); err != nil {
		if pods, reasons := tracker.left(); len(pods) > 0 && blocked(ctx, err, reasons) {
			return &BlockedError{Node: name, Pods: pods, Reasons: reasons, Err: err}
		}
		return fmt.Errorf("drain of node %q failed: %w", name, err)
	}
	return nil
}

// blocked says whether a drain stopped because pods would not leave in time (refused
// evictions retried until the timeout, or an interruption while waiting), rather than
// on an error of its own, which is reported as it is.
func blocked(ctx context.Context, err error, reasons []string) bool {
	return len(reasons) > 0 || ctx.Err() != nil || strings.Contains(err.Error(), "global timeout reached")
}

// CheckDrain says whether a drain of the node can start: the pods kubectl's drain
// refuses without a flag (unmanaged pods without Force, DaemonSet pods without
// IgnoreDaemonSets, emptyDir pods without DeleteEmptyDirData) make it fail before
// anything changed.
func CheckDrain(ctx context.Context, client kubernetes.Interface, name string, o DrainOptions) error {
	helper := &drain.Helper{Ctx: ctx, Client: client, Force: o.Force, IgnoreAllDaemonSets: o.IgnoreDaemonSets,
		DeleteEmptyDirData: o.DeleteEmptyDirData, PodSelector: o.PodSelector, Out: io.Discard, ErrOut: io.Discard,
		AdditionalFilters: o.filters()}
	if _, errs := helper.GetPodsForDeletion(name); errs != nil {
		return fmt.Errorf("node %q cannot be drained: %w", name, utilerrors.NewAggregate(errs))
	}
	return nil
}

// listForDrain is a client dry run: the pods a drain would evict, or why it could not.
func listForDrain(helper *drain.Helper, name string, out io.Writer) error {
	list, errs := helper.GetPodsForDeletion(name)
	if errs != nil {
		return fmt.Errorf("drain of node %q failed: %w", name, utilerrors.NewAggregate(errs))
	}
	if w := list.Warnings(); w != "" {
		fmt.Fprintf(helper.ErrOut, "WARNING: %s\n", w)
	}
	for _, pod := range list.Pods() {
		fmt.Fprintf(out, "evicting pod %s/%s (dry run)\n", pod.Namespace, pod.Name)
	}
	return nil
}

// evictionTracker remembers which pods an eviction started on and has not finished,
// and the last reason the API server gave for refusing each. It is the drain helper's
// ErrOut: the helper prints a refused eviction every retry; the tracker prints the first
// refusal of each pod and keeps the rest for the final report.
type evictionTracker struct {
	mu      sync.Mutex
	out     io.Writer
	pending map[string]bool
	done    map[string]bool
	reasons map[string]string
}

func newEvictionTracker(out io.Writer) *evictionTracker {
	return &evictionTracker{out: out, pending: map[string]bool{}, done: map[string]bool{}, reasons: map[string]string{}}
}

func (t *evictionTracker) started(pod *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[pod.Namespace+"/"+pod.Name] = true
}

func (t *evictionTracker) finished(pod *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, pod.Namespace+"/"+pod.Name)
	t.done[pod.Namespace+"/"+pod.Name] = true
}

// retryLine matches the drain helper's `error when evicting pods/"NAME" -n "NS" (will
// retry after 500ms): REASON`.
var retryLine = regexp.MustCompile(`^error when evicting pods/"([^"]+)" -n "([^"]+)" \(will retry after [^)]*\): (.*)$`)

func (t *evictionTracker) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		m := retryLine.FindStringSubmatch(line)
		if m == nil {
			fmt.Fprintln(t.out, line)
			continue
		}
		key := m[2] + "/" + m[1]
		if _, seen := t.reasons[key]; !seen {
			fmt.Fprintf(t.out, "pod %s: eviction refused, retrying: %s\n", key, m[3])
		}
		t.reasons[key] = strings.TrimSuffix(m[3], ".")
	}
	return len(p), nil
}

// onceWriter passes lines through, but each "evicting pod ..." line only once: the
// drain helper prints it again on every retry of a refused eviction.
type onceWriter struct {
	mu   sync.Mutex
	out  io.Writer
	seen map[string]bool
}

func (w *onceWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if strings.HasPrefix(line, "evicting pod ") {
			if w.seen[line] {
				continue
			}
			w.seen[line] = true
		}
		fmt.Fprintln(w.out, line)
	}
	return len(p), nil
}

// left returns the pods not evicted (started and not finished, or refused and not
// finished: a server dry run reports no start), sorted, with the distinct reasons given.
func (t *evictionTracker) left() (pods, reasons []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[string]bool{}
	all := map[string]bool{}
	for p := range t.pending {
		all[p] = true
	}
	for p := range t.reasons {
		if !t.done[p] {
			all[p] = true
		}
	}
	for p := range all {
		pods = append(pods, p)
		if r := t.reasons[p]; r != "" && !seen[r] {
			seen[r] = true
			reasons = append(reasons, r)
		}
	}
	sort.Strings(pods)
	sort.Strings(reasons)
	return pods, reasons
}

// patchNode sets spec.unschedulable (when unschedulable is not nil) and annotations
// (nil values remove) in one merge patch.
func patchNode(ctx context.Context, client kubernetes.Interface, name string, unschedulable *bool, annotations map[string]*string, dryRun cmdutil.DryRunStrategy) (*corev1.Node, error) {
	patch := map[string]any{}
	if len(annotations) > 0 {
		patch["metadata"] = map[string]any{"annotations": annotations}
	}
	if unschedulable != nil {
		patch["spec"] = map[string]any{"unschedulable": *unschedulable}
	}
	if dryRun == cmdutil.DryRunClient {
		return client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{DryRun: ServerDryRun(dryRun)}
	return client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, opts)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
