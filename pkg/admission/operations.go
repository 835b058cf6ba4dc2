package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/compat"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// PathOperations serves the operations webhook: DriverRollouts and StressRuns.
const PathOperations = "/validate-operations"

const hookOperations = "operations"

// MatrixLoader returns the compatibility matrix C1 judges by: the embedded one, or the
// operator's ConfigMap (read when a rollout is created, which is rare, so it is not
// cached).
type MatrixLoader func(ctx context.Context) (*compat.Matrix, error)

// RegisterOperations serves the operations webhook on srv.
func RegisterOperations(srv webhook.Server, c Catalog, matrix MatrixLoader) {
	srv.Register(PathOperations, newWebhook(&OperationsHandler{Catalog: c, Matrix: matrix}))
}

// OperationsHandler judges DriverRollouts and StressRuns on creation, so that one made
// by any client (plain kubectl, a GitOps tool) gets the checks the plugin makes before
// it creates one: U2, U5, U6 (a rollout by domain) and the compatibility pre-flight C1 for a rollout (overridden,
// as the plugin's --force does, by runwhere.ai/force on the rollout: "<who>: <why>"),
// T3 and T4 (a run by domain) for a stress run. Their specs are immutable where these rules look, so updates are
// not judged.
type OperationsHandler struct {
	Catalog Catalog
	Matrix  MatrixLoader
}

// Handle implements admission.Handler.
func (h *OperationsHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		observe(hookOperations, nil, OutcomeAllowed, start)
		return admission.Allowed("")
	}
	cat := h.Catalog.forRequest(ctx)
	var (
		err      error
		warnings []string
	)
	switch req.Kind.Kind {
	case "DriverRollout":
		var ro v1alpha1.DriverRollout
		if derr := decode(req.Object, &ro); derr != nil {
			return errorf(hookOperations, start, http.StatusBadRequest, "decoding the rollout: %v", derr)
		}
		var readErr error
		warnings, err, readErr = h.rollout(ctx, cat, &ro, req.UserInfo.Username)
		if readErr != nil {
			return errorf(hookOperations, start, http.StatusInternalServerError, "%v", readErr)
		}
	case "StressRun":
		var run v1alpha1.StressRun
		if derr := decode(req.Object, &run); derr != nil {
			return errorf(hookOperations, start, http.StatusBadRequest, "decoding the stress run: %v", derr)
		}
		_, exists := cat.Pool(run.Spec.Pool)
		members := cat.members(run.Spec.Pool)
		err = policy.CheckStressRun(run.Spec, exists, nodeNames(members))
		if err == nil && run.Spec.Domains {
			err = policy.CheckStressDomains(cat.poolObject(run.Spec.Pool), run.Spec.Pool, members)
		}
	default:
		return errorf(hookOperations, start, http.StatusBadRequest, "expected a DriverRollout or a StressRun, got %q", req.Kind.Kind)
	}
	if cat.err != nil {
		return errorf(hookOperations, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
	}
	if err != nil {
		return deny(ctx, hookOperations, start, err, warnings)
	}
	observe(hookOperations, nil, OutcomeAllowed, start)
	return admission.Allowed("").WithWarnings(warnings...)
}

// rollout judges a DriverRollout: U2 and U5, then C1 unless forced. readErr is a
// matrix that could not be read: the rollout is not judged, and its creator retries.
func (h *OperationsHandler) rollout(ctx context.Context, cat *requestCatalog, ro *v1alpha1.DriverRollout, user string) (warnings []string, violation, readErr error) {
	var targets []*corev1.Node
	var missing []string
	if ro.Spec.Pool != "" {
		targets = cat.members(ro.Spec.Pool)
	}
	for _, name := range ro.Spec.Nodes {
		n, ok := cat.node(name)
		if !ok {
			missing = append(missing, name)
			continue
		}
		targets = append(targets, n)
	}
	if err := policy.CheckDriverRollout(ro.Spec, nodeNames(targets), missing); err != nil {
		return nil, err, nil
	}
	if k := ro.Spec.MaxUnavailableDomains; k != nil {
		if err := policy.CheckMaxUnavailableDomains(cat.poolObject(ro.Spec.Pool), ro.Spec.Pool, targets, *k); err != nil {
			return nil, err, nil
		}
	}
	m, err := h.Matrix(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the compatibility matrix could not be read, so C1 cannot judge the rollout: %w", err)
	}
	models := make([]string, len(targets))
	for i, n := range targets {
		models[i] = policy.GPUType(n)
	}
	pool := cat.poolObject(rolloutPool(ro, targets))
	c1 := compat.FirstErr(compat.DriverPreflight(m, pool, models, ro.Spec.Version))
	if c1 == nil {
		return nil, nil, nil
	}
	force, forced := ro.Annotations[policy.AnnotationForce]
	if !forced {
		return nil, fmt.Errorf("%w; to upgrade all the same, annotate the rollout %s=\"<who>: <why>\" (the plugin's --force)", c1, policy.AnnotationForce), nil
	}
	if _, _, err := policy.ParseForce(force); err != nil {
		return nil, err, nil
	}
	return []string{fmt.Sprintf("[C1] overridden by %s=%q (request by %s): %v", policy.AnnotationForce, force, user, c1)}, nil, nil
}

// rolloutPool is the pool whose declared software the pre-flight reads: the rollout's
// pool, else the pool of its first node.
func rolloutPool(ro *v1alpha1.DriverRollout, targets []*corev1.Node) string {
	if ro.Spec.Pool != "" || len(targets) == 0 {
		return ro.Spec.Pool
	}
	return targets[0].Labels[policy.LabelPool]
}

func nodeNames(nodes []*corev1.Node) []string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
}

// node reads one node from the cache.
func (c *requestCatalog) node(name string) (*corev1.Node, bool) {
	var n corev1.Node
	err := c.r.Get(c.ctx, client.ObjectKey{Name: name}, &n)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	c.fail(err)
	return &n, err == nil
}

// poolObject reads a Pool object from the cache; nil when there is none.
func (c *requestCatalog) poolObject(name string) *v1alpha1.Pool {
	if name == "" {
		return nil
	}
	var p v1alpha1.Pool
	err := c.r.Get(c.ctx, client.ObjectKey{Name: name}, &p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	c.fail(err)
	if err != nil {
		return nil
	}
	return &p
}
