package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// ExclusiveTaintReconciler keeps the taint runwhere.ai/pool=<pool>:NoSchedule on every
// member of an exclusive pool, however the node joined (the plugin, gpuctl, a plain
// `kubectl label`, any client), and removes it from a node that is no member of an
// exclusive pool (it left, the pool stopped being exclusive, or its Pool object is
// gone). It is level-triggered: each node is brought to what its labels and the Pool
// objects say, whatever happened before. The plugin writes the same taint in the same
// request as the label (policy.ApplyJoin, ApplyLeave); policy.DesiredExclusiveTaints
// follows the same rule, so the two agree and never undo each other. Writes are patches at the resourceVersion read, so a
// concurrent writer is never overwritten: the node is read again and judged again.
//
// It also records the Event that a pool of labels only is gone when its last node left
// (the webhook's warning tells the client that made the request).
type ExclusiveTaintReconciler struct {
	Client   client.Client
	Recorder *events.Recorder
}

// SetupWithManager registers the reconciler: nodes (their labels and taints), and Pool
// objects (exclusive turned on or off, created or deleted) mapped to their members.
func (r *ExclusiveTaintReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("exclusive-taint").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return membershipOrTaintsChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
		}})).
		Watches(&corev1.Node{}, handler.Funcs{UpdateFunc: r.nodeLeft, DeleteFunc: r.nodeDeleted}).
		Watches(&v1alpha1.Pool{}, handler.EnqueueRequestsFromMapFunc(r.members), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.(*v1alpha1.Pool).Spec.Exclusive != e.ObjectNew.(*v1alpha1.Pool).Spec.Exclusive
			}})).
		Complete(r)
}

func membershipOrTaintsChanged(old, new *corev1.Node) bool {
	return old.Labels[policy.LabelPool] != new.Labels[policy.LabelPool] || !equality.Semantic.DeepEqual(old.Spec.Taints, new.Spec.Taints)
}

// members maps a Pool to the nodes labelled with its name.
func (r *ExclusiveTaintReconciler) members(ctx context.Context, obj client.Object) []reconcile.Request {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{policy.LabelPool: obj.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "listing the members of a pool", "pool", obj.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(nodes.Items))
	for i := range nodes.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
	}
	return out
}

// Reconcile brings one node's exclusive-pool taints to what its pool label and the Pool
// objects say.
func (r *ExclusiveTaintReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var node corev1.Node
	if err := r.Client.Get(ctx, req.NamespacedName, &node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var pool *v1alpha1.Pool
	if name := node.Labels[policy.LabelPool]; name != "" && name != policy.DefaultPool {
		var p v1alpha1.Pool
		switch err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &p); {
		case err == nil:
			pool = &p
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, err
		}
	}
	want := policy.DesiredExclusiveTaints(&node, pool)
	if equality.Semantic.DeepEqual(want, node.Spec.Taints) {
		return reconcile.Result{}, nil
	}
	orig := node.DeepCopy()
	node.Spec.Taints = want
	// At the resourceVersion read: a concurrent change (the plugin moving the node)
	// conflicts, and the node is judged again on what it became.
	if err := r.Client.Patch(ctx, &node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	verb := "added"
	if len(want) < len(orig.Spec.Taints) {
		verb = "removed"
	}
	logf.FromContext(ctx).Info("exclusive-pool taint "+verb, "node", node.Name, "pool", node.Labels[policy.LabelPool])
	return reconcile.Result{}, nil
}

// nodeLeft records the end of a pool of labels only whose last node has just left it.
func (r *ExclusiveTaintReconciler) nodeLeft(ctx context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	old, new := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
	if pool := policy.DepartsFrom(new, old); pool != "" {
		r.recordIfDissolved(ctx, pool, old)
	}
}

func (r *ExclusiveTaintReconciler) nodeDeleted(ctx context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if old, ok := e.Object.(*corev1.Node); ok {
		if pool := policy.DepartsFrom(nil, old); pool != "" {
			r.recordIfDissolved(ctx, pool, old)
		}
	}
}

// recordIfDissolved records an Event on the pool when it has no Pool object and no node
// is labelled with it any more.
func (r *ExclusiveTaintReconciler) recordIfDissolved(ctx context.Context, pool string, last *corev1.Node) {
	var p v1alpha1.Pool
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pool}, &p); !apierrors.IsNotFound(err) {
		return
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{policy.LabelPool: pool}); err != nil || len(nodes.Items) > 0 {
		return
	}
	if err := r.Recorder.Normal(ctx, events.PoolRef(pool).About(events.NodeRef(last)), "PoolDissolved",
		"pool %s is gone: node %s was its last node, and it has no Pool object (a pool of labels only)", pool, last.Name); err != nil {
		logf.FromContext(ctx).Error(err, "recording that a pool of labels only is gone", "pool", pool)
	}
}

// Where the controller keeps the list of exclusive nodes that P6's webhook judges
// bindings onto (deploy/webhook/webhooks.yaml).
const (
	// WebhookConfiguration is the ValidatingWebhookConfiguration of deploy/webhook.
	WebhookConfiguration = "litepool-webhook"
	// PlacementBindingsWebhook is P6's entry for bindings.
	PlacementBindingsWebhook = "pod-placement-bindings.runwhere.ai"
	// BindingTargetsCondition names the entry's match conditions the controller writes
	// (the second and later BindingTargetsCondition-2, -3, ...): a pods/binding is sent
	// only when its target is a node of an exclusive pool.
	BindingTargetsCondition = "binding-onto-an-exclusive-node"
	// MaxBindingTargetsExpression bounds each condition's length, below the CEL
	// parser's limit of 100,000 code points.
	MaxBindingTargetsExpression = 90_000
	// MaxBindingTargetsConditions bounds their number, so that the configuration stays
	// far below etcd's limit of 1.5 MiB an object: past it, every binding is sent, as
	// before the controller wrote a list.
	MaxBindingTargetsConditions = 8
)

// bindingTargetsKey is the one request of the binding-targets reconciler.
var bindingTargetsKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "binding-targets"}}

const (
	// notBinding holds for requests that are no binding: the conditions are safe in
	// an entry that also matches pods.
	notBinding = "!(request.resource.resource == 'bindings' || (has(request.subResource) && request.subResource == 'binding'))"
	// NotTheScheduler holds for every identity but the cluster's scheduler, whose
	// placements honour taints: its bindings are never sent. It is the deployed
	// condition (deploy/webhook/webhooks.yaml) and the fallback past
	// MaxBindingTargetsConditions. Each written condition tests it first, within the
	// condition: the API server evaluates every condition of an entry for every
	// binding, each at a price of its own whatever it holds (bench/bindings' floor),
	// so one condition fewer is that much less for every binding in the cluster.
	NotTheScheduler = "request.userInfo.username != 'system:kube-scheduler'"
)

// BindingTargetsConditions are the CEL match conditions that, ANDed, send to P6's
// webhook only the pods/binding requests of identities other than the scheduler whose
// target is one of nodes (sorted); other requests pass. No node: no binding is sent. The names are written as lists, cut into
// slices of consecutive names, one condition each: "the target sorts outside this
// slice's range, or it is in the slice". The ranges cover every string, so a target is
// listed exactly when the condition of its range holds, and the others hold anyway. One
// anchored regular expression of all the names replaces the lists where the API server
// evaluates it faster (conditionCost: numbered names), and regular expressions cut into
// slices are the last resort past MaxBindingTargetsConditions lists; past as many of
// those, every binding is sent ("true").
func BindingTargetsConditions(nodes []string) []admissionregistrationv1.MatchCondition {
	if len(nodes) == 0 {
		return bindingConditions([]string{notBinding})
	}
	lists := slicePlan(nodes, listSliceLen, list)
	if len(lists) == 1 {
		return bindingConditions(lists) // no plan has fewer conditions, and a list costs no more
	}
	if re := namesRegexp(nodes); re != "" && len(re)+len("object.target.name.matches(r'')") <= MaxBindingTargetsExpression-sliceOverhead {
		one := []string{sendsOnly("object.target.name.matches(r'" + re + "')")}
		if lists == nil || planCost(one) < planCost(lists) {
			return bindingConditions(one)
		}
	}
	if lists != nil {
		// Regular expressions would take two conditions or more, all but the last
		// filled to the limit: that costs more than the most conditions of lists.
		return bindingConditions(lists)
	}
	if fewest := slicePlan(nodes, sliceLen, membership); fewest != nil {
		return bindingConditions(fewest)
	}
	return bindingConditions([]string{NotTheScheduler})
}

// sendsOnly is the condition that holds for any request but a binding, and for a
// binding by an identity other than the scheduler when test holds.
func sendsOnly(test string) string {
	return notBinding + " || " + NotTheScheduler + " && (" + test + ")"
}

// slicePlan cuts names into slices of the length take gives, each written by member
// with its range; nil when a slice cannot be written or there would be more than
// MaxBindingTargetsConditions. One slice needs no range.
func slicePlan(names []string, take func([]string) int, member func([]string) string) []string {
	var exprs []string
	for rest := names; len(rest) > 0; {
		n := take(rest)
		if n == 0 || len(exprs) == MaxBindingTargetsConditions {
			return nil
		}
		outside := ""
		if len(exprs) > 0 {
			outside += "object.target.name < '" + rest[0] + "' || "
		}
		if n < len(rest) {
			outside += "object.target.name >= '" + rest[n] + "' || "
		}
		m := member(rest[:n])
		if len(m) > MaxBindingTargetsExpression-sliceOverhead {
			return nil // Go's regexp refused the pattern
		}
		exprs = append(exprs, sendsOnly(outside+m))
		rest = rest[n:]
	}
	return exprs
}

// conditionCost is what one more condition costs the API server for every binding, in
// characters of regular expression matched at the same cost. Measured with the API
// server's own match-condition compiler (BenchmarkConditionShapes; thread CPU time, 2
// cores, 2026-11): a condition costs about 10 µs whatever it holds, a list is a hash lookup
// (5,000 names cost what 10 do), and a regular expression about 0.8 µs per 1,000
// characters of pattern. So a pattern shorter than its list by more than this per
// condition saved is worth writing (numbered names: 10,000 in 300 characters), and one
// of names that do not share prefixes is not (random names: 10,000 in 130,000).
const conditionCost = 12_000

// planCost estimates what the API server spends on a plan's conditions per binding.
func planCost(exprs []string) int {
	cost := len(exprs) * conditionCost
	for _, e := range exprs {
		if i := strings.Index(e, ".matches(r'"); i >= 0 {
			cost += len(e) - i
		}
	}
	return cost
}

// listSliceLen is how many of names (from the first) one condition holds as a list.
func listSliceLen(names []string) int {
	room := MaxBindingTargetsExpression - sliceOverhead
	n, size := 0, len("object.target.name in []")
	for n < len(names) && size+len(names[n])+4 <= room { // "'n', "
		size += len(names[n]) + 4
		n++
	}
	return n
}

// sliceOverhead is the most a slice's condition holds besides its membership test: the
// two prefixes and both bounds (node names are at most 253 characters).
var sliceOverhead = len(sendsOnly("")) + 2*len("object.target.name >= '' || ") + 2*253

// sliceLen is how many of names (from the first) one condition holds, as a list or
// as a regular expression; 0 when not even one name fits. The regular expression of
// random names is a little shorter than their list (of patterned ones far shorter):
// past the names a list holds, bisection (a longer slice's expression is no shorter,
// nearly always) to within 1/64 of the best.
func sliceLen(names []string) int {
	room := MaxBindingTargetsExpression - sliceOverhead
	lo := listSliceLen(names)
	fits := func(n int) bool { return len(namesPattern(names[:n]))+len("object.target.name.matches(r'')") <= room }
	if lo == len(names) || fits(len(names)) {
		return len(names)
	}
	hi := len(names) // fits(lo) as a list, !fits(hi)
	if n := 4 * max(lo, 1); n < hi && !fits(n) {
		hi = n
	}
	for hi-lo > max(1, lo/64) {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// membership is a list of names or, when that is too long for a condition, the
// regular expression of the same names. The regular expression is a raw string: its
// backslashes reach RE2 as written, and a DNS subdomain's pattern holds no quote.
func membership(names []string) string {
	l := list(names)
	if len(l) <= MaxBindingTargetsExpression-sliceOverhead {
		return l
	}
	if re := namesRegexp(names); re != "" {
		return "object.target.name.matches(r'" + re + "')"
	}
	return l
}

// list is the test that the target is one of names.
func list(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'" // node names are DNS subdomains: no quote or backslash
	}
	return "object.target.name in [" + strings.Join(quoted, ", ") + "]"
}

// bindingConditions names exprs BindingTargetsCondition, BindingTargetsCondition-2, ...
func bindingConditions(exprs []string) []admissionregistrationv1.MatchCondition {
	out := make([]admissionregistrationv1.MatchCondition, len(exprs))
	for i, e := range exprs {
		out[i] = admissionregistrationv1.MatchCondition{Name: BindingTargetsCondition, Expression: e}
		if i > 0 {
			out[i].Name = fmt.Sprintf("%s-%d", BindingTargetsCondition, i+1)
		}
	}
	return out
}

// IsBindingTargetsCondition tells the conditions BindingTargetsConditions names.
func IsBindingTargetsCondition(name string) bool {
	if name == BindingTargetsCondition {
		return true
	}
	k, ok := strings.CutPrefix(name, BindingTargetsCondition+"-")
	return ok && k != "" && strings.Trim(k, "0123456789") == ""
}

// WithBindingTargets is conds (an entry's match conditions) with its binding-target
// conditions replaced by targets, in the place of the first of them (at the end when
// it has none); the others are kept as they are, in their order.
func WithBindingTargets(conds, targets []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
	at := slices.IndexFunc(conds, func(c admissionregistrationv1.MatchCondition) bool { return IsBindingTargetsCondition(c.Name) })
	kept := slices.DeleteFunc(slices.Clone(conds), func(c admissionregistrationv1.MatchCondition) bool { return IsBindingTargetsCondition(c.Name) })
	if at < 0 {
		at = len(kept)
	}
	return slices.Concat(kept[:at], targets, kept[at:])
}

// BindingTargetsReconciler keeps the BindingTargetsCondition conditions of P6's
// bindings entry to the nodes of exclusive pools, so that a webhook outage delays only
// the bindings that could land a pod on such a node: every other binding, by any
// scheduler, is never sent. Level-triggered: any change of nodes' pool labels, of
// Pools or of the webhook configuration (re-applied from deploy/webhook) recomputes
// the conditions and writes them when they differ.
type BindingTargetsReconciler struct {
	Client client.Client
}

// SetupWithManager registers the reconciler; every event maps to its one request.
func (r *BindingTargetsReconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{bindingTargetsKey}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("exclusive-binding-targets").
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, one, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == WebhookConfiguration
		}))).
		Watches(&corev1.Node{}, one, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetLabels()[policy.LabelPool] != e.ObjectNew.GetLabels()[policy.LabelPool]
		}})).
		Watches(&v1alpha1.Pool{}, one, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.(*v1alpha1.Pool).Spec.Exclusive != e.ObjectNew.(*v1alpha1.Pool).Spec.Exclusive
		}})).
		Complete(r)
}

// Reconcile writes the exclusive nodes into the webhook configuration.
func (r *BindingTargetsReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	nodes, err := r.exclusiveNodes(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	targets := BindingTargetsConditions(nodes)
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.Client.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &cfg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // not installed: its creation is an event
	}
	wi := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == PlacementBindingsWebhook })
	if wi < 0 || !slices.ContainsFunc(cfg.Webhooks[wi].MatchConditions, func(c admissionregistrationv1.MatchCondition) bool {
		return c.Name == BindingTargetsCondition
	}) {
		return reconcile.Result{}, nil
	}
	want := WithBindingTargets(cfg.Webhooks[wi].MatchConditions, targets)
	if equality.Semantic.DeepEqual(want, cfg.Webhooks[wi].MatchConditions) {
		return reconcile.Result{}, nil
	}
	// A JSON patch of the entry's match conditions at the resourceVersion read, guarded
	// by a test of the entry's name: it never touches the CA bundle the webhook writes
	// beside them, and a concurrent writer makes it fail and be read again.
	value, err := json.Marshal(want)
	if err != nil {
		return reconcile.Result{}, err
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/resourceVersion","value":%q},{"op":"test","path":"/webhooks/%d/name","value":%q},{"op":"replace","path":"/webhooks/%d/matchConditions","value":%s}]`,
		cfg.ResourceVersion, wi, PlacementBindingsWebhook, wi, value)
	if err := r.Client.Patch(ctx, &cfg, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		return reconcile.Result{}, err
	}
	logf.FromContext(ctx).Info("bindings sent to the placement webhook", "exclusiveNodes", len(nodes), "conditions", len(targets),
		"allBindings", targets[0].Expression == "true")
	return reconcile.Result{}, nil
}

// exclusiveNodes lists the members of exclusive pools, sorted.
func (r *BindingTargetsReconciler) exclusiveNodes(ctx context.Context) ([]string, error) {
	var pools v1alpha1.PoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		return nil, err
	}
	var out []string
	for i := range pools.Items {
		if !pools.Items[i].Spec.Exclusive {
			continue
		}
		var nodes corev1.NodeList
		if err := r.Client.List(ctx, &nodes, client.MatchingLabels{policy.LabelPool: pools.Items[i].Name}); err != nil {
			return nil, err
		}
		for j := range nodes.Items {
			out = append(out, nodes.Items[j].Name)
		}
	}
	sort.Strings(out)
	return out, nil
}
