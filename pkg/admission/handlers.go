// Package admission serves litepool's rules as admission webhooks: it decodes a request,
// reads the state it needs from the informer cache, calls pkg/policy and answers with a
// patch, an allowance, warnings or a denial. It reads the API server directly only where
// a cache would be stale or costly: the pod a binding names (P6), a pod's
// ResourceClaims and DeviceClasses (P5, only pods with claims pay), the departure
// reservations (N3), which it also writes, and the operator's compatibility matrix (C1).
package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Paths the webhooks are served at; deploy/webhook's configurations name them.
const (
	PathPods  = "/mutate-pods"
	PathNodes = "/validate-nodes"
	PathPools = "/validate-pools"
	// PathPlacement judges where pods may run (P6).
	PathPlacement = "/validate-pod-placement"
)

// Register serves the webhooks on srv, answering from c; node departures are reserved
// through d; accel says which resources the pod rules judge as accelerators.
func Register(srv webhook.Server, c Catalog, d *Departures, accel policy.Accelerators) {
	srv.Register(PathPlacement, newWebhook(&PlacementHandler{Catalog: c, Live: liveReader(d), DaemonSetControllers: DaemonSetControllers, AgentNamespaces: AgentNamespaces}))
	srv.Register(PathPods, newWebhook(&PodHandler{Catalog: c, Accelerators: accel, Live: liveReader(d), DaemonSetControllers: DaemonSetControllers, AgentNamespaces: AgentNamespaces}))
	srv.Register(PathNodes, newWebhook(&NodeHandler{Catalog: c, Departures: d}))
	srv.Register(PathPools, newWebhook(&PoolHandler{Catalog: c, Accelerators: accel, Live: liveReader(d)}))
	srv.Register(PathVolcano, newWebhook(&VolcanoHandler{Catalog: c}))
	srv.Register(PathJobs, newWebhook(&JobHandler{Catalog: c, Accelerators: accel}))
}

// DaemonSetControllers are the identities P6 takes as the DaemonSet controller's
// (litepool-webhook --daemonset-controller-user adds to them).
var DaemonSetControllers = slices.Clone(policy.DaemonSetControllers)

// AgentNamespaces are the namespaces P6 takes node agents from
// (policy.TrustedAgentNamespaces: litepool-webhook sets them from its namespace and
// --agent-namespace); nil: kube-system alone.
var AgentNamespaces []string

const kindPool = "Pool"

// Webhook names in metrics.
const (
	hookPods      = "pods"
	hookNodes     = "nodes"
	hookPools     = "pools"
	hookPlacement = "placement"
)

func liveReader(d *Departures) client.Reader {
	if d == nil {
		return nil
	}
	return d.Client
}

// errorf answers a request that could not be judged. The API server treats an answer
// with allowed=false as a denial whatever the failure policy, so callers whose policy is
// Ignore answer allowed with a warning instead (see allowUnjudged).
func errorf(hook string, start time.Time, code int32, format string, args ...any) admission.Response {
	observe(hook, nil, OutcomeError, start)
	return admission.Errored(code, fmt.Errorf(format, args...))
}

// allowUnjudged admits a request the webhook could not judge, as failurePolicy Ignore
// would, and says so.
func allowUnjudged(ctx context.Context, hook string, start time.Time, err error) admission.Response {
	logf.FromContext(ctx).Error(err, "admitted without judging", "webhook", hook)
	observe(hook, nil, OutcomeError, start)
	return admission.Allowed("").WithWarnings(fmt.Sprintf("litepool-webhook could not judge this request and admitted it (failure policy Ignore): %v", err))
}

func deny(ctx context.Context, hook string, start time.Time, err error, warnings []string) admission.Response {
	rules := policy.Rules(err)
	if len(rules) == 0 {
		rules = []string{"unknown"}
	}
	logf.FromContext(ctx).Info("denied", "webhook", hook, "rules", rules, "reason", err.Error())
	observe(hook, rules, OutcomeDenied, start)
	resp := admission.Denied(err.Error()).WithWarnings(warnings...)
	// The rule ids travel as status causes, so that clients need not parse the message.
	resp.Result.Details = &metav1.StatusDetails{Causes: policy.Causes(err)}
	return resp
}

func decode(raw runtime.RawExtension, into any) error {
	if len(raw.Raw) == 0 {
		return errors.New("the request carries no object")
	}
	return json.Unmarshal(raw.Raw, into)
}

// PodHandler is the mutating pod webhook: rules P1-P5 on pod creation.
type PodHandler struct {
	Catalog Catalog
	// Accelerators says which resources P5 judges; the zero value is the known set.
	Accelerators policy.Accelerators
	// Live reads a pod's ResourceClaims, their templates and DeviceClasses for P5; nil
	// leaves claims unjudged.
	Live client.Reader
	// DaemonSetControllers are the identities the DaemonSet controller creates pods
	// as (P6's node agents); nil: policy.DaemonSetControllers.
	DaemonSetControllers []string
	// AgentNamespaces are the namespaces node agents may come from; nil: kube-system.
	AgentNamespaces []string
}

// Handle implements admission.Handler.
func (h *PodHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		observe(hookPods, nil, OutcomeAllowed, start)
		return admission.Allowed("litepool judges pods only on create")
	}
	if req.Kind.Kind != "Pod" {
		return errorf(hookPods, start, http.StatusBadRequest, "expected a Pod, got %q", req.Kind.Kind)
	}
	var pod corev1.Pod
	if err := decode(req.Object, &pod); err != nil {
		return errorf(hookPods, start, http.StatusBadRequest, "decoding the pod: %v", err)
	}
	if pod.Namespace == "" { // pods created with generateName through a namespaced client
		pod.Namespace = req.Namespace
	}
	cat := h.Catalog.forRequest(ctx)
	cat.podRules = true
	ns := cat.Namespace(pod.Namespace)
	if ns == nil && cat.err == nil {
		// A namespace created a moment ago: its default pool and labels (P4) are not
		// known yet. Refuse rather than guess; the client or controller retries.
		return errorf(hookPods, start, http.StatusInternalServerError, "namespace %q is not in the webhook's cache yet; retry in a moment", pod.Namespace)
	}
	patch, warnings, err := policy.MutatePod(&pod, ns, cat, h.Accelerators)
	if cat.err != nil {
		return errorf(hookPods, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
	}
	if err == nil {
		var claimWarnings []string
		claimWarnings, err = h.checkClaims(ctx, &pod, ns, cat)
		warnings = append(warnings, claimWarnings...)
	}
	var ops []jsonpatch.JsonPatchOperation
	var judged []string // the rules that had something to judge besides P1-P5
	if err == nil {
		ops = podPatchOps(&pod, patch) // against the pod as it was sent
		var placed bool
		if placed, err = h.checkPlacement(req, &pod, patch, ns, cat); placed {
			judged = append(judged, "P6")
		}
	}
	if cat.err != nil {
		return errorf(hookPods, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
	}
	if err != nil {
		return deny(ctx, hookPods, start, err, warnings)
	}
	if len(ops) == 0 {
		observe(hookPods, judged, OutcomeAllowed, start)
		return admission.Allowed("").WithWarnings(warnings...)
	}
	observe(hookPods, append([]string{"P1"}, judged...), OutcomeMutated, start)
	return admission.Patched("", ops...).WithWarnings(warnings...)
}

// checkPlacement judges P6 on a pod this webhook mutates, as it will be stored (pod
// with patch applied). The pod-placement entry's object selector leaves a pod with a
// pool label to this call, which the pod makes anyway, so that P6 costs the API server
// no match condition on it (docs/webhook.md, "P6 on pods that name a pool"); this hook
// is reinvoked when a later mutation changes the pod. judged says whether the pod could
// pass an exclusive pool's taint, so that P6 had to look at the pools' members.
func (h *PodHandler) checkPlacement(req admission.Request, pod *corev1.Pod, patch policy.PodPatch, ns *corev1.Namespace, cat *requestCatalog) (judged bool, err error) {
	patch.Apply(pod)
	if !policy.MayPassExclusiveTaint(pod) {
		return false, nil
	}
	members := cat.ExclusiveMembersFor(pod.Spec.NodeName)
	if cat.err != nil {
		return true, nil // the caller answers the cache's error
	}
	return true, policy.CheckExclusivePlacement(pod, ns, pod.Spec.NodeName, members, createdAgent(req, pod, h.DaemonSetControllers, h.AgentNamespaces))
}

// NodeHandler is the validating node webhook: rules N1-N3 with the audited override.
// Two webhook configurations call it: one (failure policy Ignore) for label changes that
// are no departure from a pool, one (Fail) for departures, which it reserves through
// Departures so that concurrent departures cannot together break a pool's floor.
type NodeHandler struct {
	Catalog Catalog
	// Departures reserves departures; nil judges them from the cache alone (tests).
	Departures *Departures
}

// Handle implements admission.Handler. A request that is no departure is admitted with
// a warning when it cannot be judged (cache error), as its failure policy Ignore
// would; a departure that cannot be judged or reserved is refused.
func (h *NodeHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.SubResource != "" && req.SubResource != "status" {
		observe(hookNodes, nil, OutcomeAllowed, start)
		return admission.Allowed("litepool judges nodes and nodes/status only")
	}
	if req.Kind.Kind != "Node" {
		return errorf(hookNodes, start, http.StatusBadRequest, "expected a Node, got %q", req.Kind.Kind)
	}
	var node, old *corev1.Node
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
		node = &corev1.Node{}
		if err := decode(req.Object, node); err != nil {
			return errorf(hookNodes, start, http.StatusBadRequest, "decoding the node: %v", err)
		}
	case admissionv1.Delete:
	default:
		observe(hookNodes, nil, OutcomeAllowed, start)
		return admission.Allowed("")
	}
	if req.Operation != admissionv1.Create {
		old = &corev1.Node{}
		if err := decode(req.OldObject, old); err != nil {
			return errorf(hookNodes, start, http.StatusBadRequest, "decoding the old node: %v", err)
		}
	}
	cat := h.Catalog.forRequest(ctx)
	if pool := policy.DepartsFrom(node, old); pool != "" {
		return h.depart(ctx, req, start, cat, pool, node, old)
	}
	d, err := policy.AdmitNode(node, old, cat)
	if cat.err != nil {
		return allowUnjudged(ctx, hookNodes, start, cat.err)
	}
	if err == nil {
		h.releaseOnJoin(ctx, req, node, old)
	}
	return h.answer(ctx, req, start, d, err)
}

// releaseOnJoin drops the departure grant of a node that (re)joins a pool: the old
// object does not carry the pool, so its departure has committed and the grant no longer
// stands for a departure in flight. Left in place, it would keep the node out of the
// pool's count until it expired (over-refusing the next departures). A failure only
// leaves the floor stricter until then, so it is logged, not answered.
func (h *NodeHandler) releaseOnJoin(ctx context.Context, req admission.Request, node, old *corev1.Node) {
	pool := policy.JoinsPool(node, old)
	if pool == "" || h.Departures == nil || (req.DryRun != nil && *req.DryRun) {
		return
	}
	if _, ok := h.Catalog.forRequest(ctx).cachedNode(node); !ok {
		return // a review no API server sent: it releases nothing
	}
	if err := h.Departures.Release(ctx, pool, node.Name); err != nil {
		logf.FromContext(ctx).Error(err, "releasing the departure grant of a node that rejoined its pool", "node", node.Name, "pool", pool)
	}
}

// depart judges a departure from pool and reserves it: fail closed.
func (h *NodeHandler) depart(ctx context.Context, req admission.Request, start time.Time, cat *requestCatalog, pool string, node, old *corev1.Node) admission.Response {
	var d policy.NodeDecision
	judge := func(granted map[string]bool) error {
		cat.granted = granted
		var err error
		d, err = policy.AdmitNode(node, old, cat)
		if cat.err != nil {
			return cat.err
		}
		return err
	}
	if h.Departures == nil {
		err := judge(nil)
		if cat.err != nil {
			return errorf(hookNodes, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
		}
		return h.answer(ctx, req, start, d, err)
	}
	// The review is a claim until the cache confirms it: anyone who reaches the
	// webhook's Service can post one. A reservation is written only for a node the
	// cache holds with the review's name and uid, in the pool it departs from; a review
	// naming another node (or a pool that does not exist) changes nothing.
	if cached, ok := cat.cachedNode(old); !ok || cached.Labels[policy.LabelPool] != pool {
		if cat.err != nil {
			return errorf(hookNodes, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
		}
		return errorf(hookNodes, start, http.StatusConflict, "node %q (uid %s) is not a member of pool %q in the webhook's cache: nothing was reserved; retry in a moment if the node changed just now", old.Name, old.UID, pool)
	}
	dryRun := req.DryRun != nil && *req.DryRun
	err := h.Departures.Grant(ctx, pool, old.Name, dryRun, judge)
	switch {
	case cat.err != nil:
		return errorf(hookNodes, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
	case err != nil && !IsDenied(err):
		return errorf(hookNodes, start, http.StatusInternalServerError, "could not reserve the departure of node %q from pool %q: %v; nothing was changed, retry", old.Name, pool, err)
	case err != nil:
		return h.answer(ctx, req, start, d, errors.Unwrap(err))
	}
	h.releaseOnJoin(ctx, req, node, old) // a move from one pool to another joins the other
	return h.answer(ctx, req, start, d, nil)
}

// answer turns the node rules' decision into the response.
func (h *NodeHandler) answer(ctx context.Context, req admission.Request, start time.Time, d policy.NodeDecision, err error) admission.Response {
	if err != nil {
		return deny(ctx, hookNodes, start, err, d.Warnings)
	}
	resp := admission.Allowed("").WithWarnings(d.Warnings...)
	if f := d.Forced; f != nil {
		// The audit trail of an override: a log line here, and annotations the API
		// server writes into its audit event for this request.
		logf.FromContext(ctx).Info("rule N3 overridden by "+policy.AnnotationForce, "node", req.Name,
			"operation", req.Operation, "forcedBy", f.By, "reason", f.Reason, "overridden", f.Overrode,
			"user", req.UserInfo.Username, "dryRun", req.DryRun != nil && *req.DryRun)
		resp.AuditAnnotations = map[string]string{"n3-forced-by": f.By, "n3-forced-reason": f.Reason, "n3-overridden": f.Overrode}
		observe(hookNodes, []string{"N3"}, OutcomeForced, start)
		return resp
	}
	observe(hookNodes, nil, OutcomeAllowed, start)
	return resp
}

// PoolHandler is the validating pool webhook: R1 on create and update, R2 on delete.
type PoolHandler struct {
	Catalog Catalog
	// Accelerators count the capacity spec.queue's Volcano amounts are judged against.
	Accelerators policy.Accelerators
	// Live reads the scheduler queue a pool's queue would take the name of from the API
	// server; nil (unit tests) reads it from Catalog's reader.
	Live client.Reader
}

// Handle implements admission.Handler.
func (h *PoolHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.SubResource != "" {
		observe(hookPools, nil, OutcomeAllowed, start)
		return admission.Allowed("litepool does not judge pool subresources")
	}
	if req.Kind.Kind != kindPool {
		return errorf(hookPools, start, http.StatusBadRequest, "expected a Pool, got %q", req.Kind.Kind)
	}
	cat := h.Catalog.forRequest(ctx)
	var warnings []string
	var err error
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
		var pool v1alpha1.Pool
		if derr := decode(req.Object, &pool); derr != nil {
			return errorf(hookPools, start, http.StatusBadRequest, "decoding the pool: %v", derr)
		}
		var old *v1alpha1.Pool
		members := 0
		if req.Operation == admissionv1.Update {
			old = &v1alpha1.Pool{}
			if derr := decode(req.OldObject, old); derr != nil {
				return errorf(hookPools, start, http.StatusBadRequest, "decoding the old pool: %v", derr)
			}
			info, _ := cat.Pool(pool.Name)
			members = info.Members
		}
		err = policy.ValidatePool(&pool, old, members)
		var nodes []*corev1.Node
		if old == nil || policy.HasTopology(&pool) {
			nodes = cat.members(pool.Name)
		}
		if old == nil {
			err = errors.Join(err, policy.CheckAdoption(&pool, nodes))
		}
		err = errors.Join(err, policy.CheckTopology(&pool, old, nodes))
		if pool.Spec.Queue != nil {
			if nodes == nil {
				nodes = cat.members(pool.Name)
			}
			capacity := policy.PoolCapacity(&pool, nodes, h.Accelerators).Accelerators
			err = errors.Join(err, policy.CheckQueue(&pool, old, capacity, h.queueHolder(ctx, &pool)))
		}
	case admissionv1.Delete:
		var pool v1alpha1.Pool
		if derr := decode(req.OldObject, &pool); derr != nil {
			return errorf(hookPools, start, http.StatusBadRequest, "decoding the pool: %v", derr)
		}
		pods := cat.PoolWorkloadPods(pool.Name)
		err = policy.CheckPoolDelete(&pool, pods)
		if err == nil && len(pods) > 0 {
			warnings = append(warnings, fmt.Sprintf("[R2] pool %q deleted as confirmed by %s; %d workload pod(s) keep running on its nodes", pool.Name, policy.AnnotationConfirmDelete, len(pods)))
		}
		if n := cat.PendingPoolPods(pool.Name); n > 0 {
			warnings = append(warnings, fmt.Sprintf("[R2] %d pod(s) that ask for pool %q are still pending; without the Pool object, pods asking for it are no longer held to its policy (workload types, namespaces, exclusive toleration, HCCL)", n, pool.Name))
		}
	default:
		observe(hookPools, nil, OutcomeAllowed, start)
		return admission.Allowed("")
	}
	if cat.err != nil {
		return errorf(hookPools, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
	}
	if err != nil {
		return deny(ctx, hookPools, start, err, warnings)
	}
	observe(hookPools, nil, OutcomeAllowed, start)
	return admission.Allowed("").WithWarnings(warnings...)
}

// PlacementHandler is the validating pod webhook of rule P6: pods created with
// spec.nodeName, pods that tolerate an exclusive pool's taint, updates that change what
// P6 judges of a pod that tolerates it (tolerations added, its pool label, or the node
// selection of a gated pod), and bindings (pods/binding, or the bindings resource) onto
// an exclusive pool's node by anyone but the scheduler (matchConditions send only these).
type PlacementHandler struct {
	Catalog Catalog
	// DaemonSetControllers are the identities the DaemonSet controller creates pods
	// as; nil: policy.DaemonSetControllers.
	DaemonSetControllers []string
	// AgentNamespaces are the namespaces node agents may come from; nil: kube-system.
	AgentNamespaces []string
	// Live reads the pod a binding names from the API server; nil (unit tests) reads
	// it from Catalog.
	Live client.Reader
}

// Handle implements admission.Handler. Its failure policy is Fail: a pod it could not
// judge is refused with the reason, and its creator retries.
func (h *PlacementHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	update := req.Operation == admissionv1.Update && req.SubResource == ""
	if (req.Operation != admissionv1.Create && !update) || (req.SubResource != "" && req.SubResource != "binding") ||
		(req.Resource.Resource != "pods" && !isBinding(req)) {
		observe(hookPlacement, nil, OutcomeAllowed, start)
		return admission.Allowed("litepool judges pod placement on create, update and binding only")
	}
	cat := h.Catalog.forRequest(ctx)
	pod, target, err := h.podAndTarget(ctx, req)
	if err != nil {
		return errorf(hookPlacement, start, http.StatusBadRequest, "%v", err)
	}
	ns := cat.Namespace(pod.Namespace)
	members := cat.ExclusiveMembersFor(target)
	if cat.err != nil {
		return errorf(hookPlacement, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
	}
	if err := policy.CheckExclusivePlacement(pod, ns, target, members, h.agent(req, pod)); err != nil {
		return deny(ctx, hookPlacement, start, err, nil)
	}
	observe(hookPlacement, nil, OutcomeAllowed, start)
	return admission.Allowed("")
}

// isBinding says whether req binds a pod to a node: pods/NAME/binding, or the same
// Binding POSTed to the namespace's bindings resource (schedulers may use either).
func isBinding(req admission.Request) bool {
	return (req.Resource.Resource == "pods" && req.SubResource == "binding") || (req.Resource.Resource == "bindings" && req.SubResource == "")
}

// agent is what the request says of the pod being a node agent: only a creation knows
// who creates the pod; a binding knows only what the pod claims, and its namespace. The
// namespace is the request's: the API server has checked it against the pod's.
func (h *PlacementHandler) agent(req admission.Request, pod *corev1.Pod) policy.Agent {
	if isBinding(req) {
		if policy.ClaimsNodeAgent(pod, req.Namespace, h.AgentNamespaces) {
			return policy.AgentClaimed
		}
		return policy.AgentNone
	}
	return createdAgent(req, pod, h.DaemonSetControllers, h.AgentNamespaces)
}

// createdAgent is what a pod's creation says of it being a node agent: who creates it
// (known only then) and in which namespace (one of namespaces, which the operator
// trusts with node agents).
func createdAgent(req admission.Request, pod *corev1.Pod, controllers, namespaces []string) policy.Agent {
	if controllers == nil {
		controllers = policy.DaemonSetControllers
	}
	if req.Operation == admissionv1.Create && policy.IsNodeAgent(pod, req.Namespace, req.UserInfo.Username, controllers, namespaces) {
		return policy.AgentCreated
	}
	return policy.AgentNone
}

// podAndTarget is the pod being placed and the node it is bound to ("" when none).
func (h *PlacementHandler) podAndTarget(ctx context.Context, req admission.Request) (*corev1.Pod, string, error) {
	if isBinding(req) {
		var b corev1.Binding
		if err := decode(req.Object, &b); err != nil {
			return nil, "", fmt.Errorf("decoding the binding: %w", err)
		}
		// The webhook keeps no pod specs (podindex holds what the rules list), so the
		// pod of a binding is read from the API server: only bindings to exclusive
		// nodes reach this hook (its matchCondition), and the read sees the pod as it is
		// now, whatever changed since it was created.
		pod := &corev1.Pod{}
		key := client.ObjectKey{Namespace: req.Namespace, Name: req.Name}
		reader := h.Live
		if reader == nil {
			reader = h.Catalog.Reader
		}
		if err := reader.Get(ctx, key, pod); err != nil {
			return nil, "", fmt.Errorf("reading pod %s of the binding: %w", key, err)
		}
		return pod, b.Target.Name, nil
	}
	pod := &corev1.Pod{}
	if err := decode(req.Object, pod); err != nil {
		return nil, "", fmt.Errorf("decoding the pod: %w", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return pod, pod.Spec.NodeName, nil
}
