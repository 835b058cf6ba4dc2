package controller

import (
	"context"
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
	// PlacementWebhook is its P6 entry.
	PlacementWebhook = "pod-placement.runwhere.ai"
	// BindingTargetsCondition is the entry's match condition the controller writes:
	// a pods/binding is sent only when its target is a node of an exclusive pool.
	BindingTargetsCondition = "binding-onto-an-exclusive-node"
	// MaxBindingTargetsExpression bounds the condition's length, below the CEL
	// parser's limit of 100,000 code points: past it, every binding is sent, as before
	// the controller wrote a list.
	MaxBindingTargetsExpression = 90_000
)

// bindingTargetsKey is the one request of the binding-targets reconciler.
var bindingTargetsKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "binding-targets"}}

// BindingTargetsExpression is the CEL match condition that sends to P6's webhook only
// the pods/binding requests whose target is one of nodes (other requests, pods being
// created or updated, are not bindings and pass). An empty list sends no binding.
// The set is written as a list or, when the list is too long, as one anchored regular
// expression of the same names (10,000 names of a numbered or cloud-style pattern fit
// where a list holds about 4,000); only when neither fits in MaxBindingTargetsExpression
// is every binding sent.
func BindingTargetsExpression(nodes []string) string {
	notBinding := "!(request.resource.resource == 'bindings' || (has(request.subResource) && request.subResource == 'binding'))"
	if len(nodes) == 0 {
		return notBinding
	}
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = "'" + n + "'" // node names are DNS subdomains: no quote or backslash
	}
	expr := notBinding + " || object.target.name in [" + strings.Join(quoted, ", ") + "]"
	if len(expr) <= MaxBindingTargetsExpression {
		return expr
	}
	// A raw string: the pattern's backslashes reach RE2 as written, and a DNS
	// subdomain's pattern holds no quote.
	if re := namesRegexp(nodes); re != "" {
		if expr = notBinding + " || object.target.name.matches(r'" + re + "')"; len(expr) <= MaxBindingTargetsExpression {
			return expr
		}
	}
	return "true"
}

// BindingTargetsReconciler keeps BindingTargetsCondition of P6's webhook to the nodes of
// exclusive pools, so that a webhook outage delays only the bindings that could land a
// pod on such a node: every other binding, by any scheduler, is never sent. Level-
// triggered: any change of nodes' pool labels, of Pools or of the webhook configuration
// (re-applied from deploy/webhook) recomputes the list and writes it when it differs.
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

// Reconcile writes the list of exclusive nodes into the webhook configuration.
func (r *BindingTargetsReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	nodes, err := r.exclusiveNodes(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	want := BindingTargetsExpression(nodes)
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.Client.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &cfg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // not installed: its creation is an event
	}
	wi := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == PlacementWebhook })
	if wi < 0 {
		return reconcile.Result{}, nil
	}
	ci := slices.IndexFunc(cfg.Webhooks[wi].MatchConditions, func(c admissionregistrationv1.MatchCondition) bool {
		return c.Name == BindingTargetsCondition
	})
	if ci < 0 || cfg.Webhooks[wi].MatchConditions[ci].Expression == want {
		return reconcile.Result{}, nil
	}
	// A JSON patch of the one expression, guarded by tests of the entry's and the
	// condition's names: it never touches the CA bundle the webhook writes beside it.
	patch := fmt.Sprintf(`[{"op":"test","path":"/webhooks/%d/name","value":%q},{"op":"test","path":"/webhooks/%d/matchConditions/%d/name","value":%q},{"op":"replace","path":"/webhooks/%d/matchConditions/%d/expression","value":%q}]`,
		wi, PlacementWebhook, wi, ci, BindingTargetsCondition, wi, ci, want)
	if err := r.Client.Patch(ctx, &cfg, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		return reconcile.Result{}, err
	}
	logf.FromContext(ctx).Info("bindings sent to the placement webhook", "exclusiveNodes", len(nodes), "allBindings", want == "true")
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
