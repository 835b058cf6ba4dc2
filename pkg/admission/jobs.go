package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// PathJobs gives a queued Job's pod template its pool's placement (P1).
const PathJobs = "/mutate-jobs"

const hookJobs = "jobs"

// JobHandler is the mutating webhook that runs rule P1 on the pod template of a
// batch/v1 Job that Kueue queues, so that the template carries what its pods will get
// at their own creation: the pool's nodeSelector (and node pool) and, for an exclusive
// pool, the toleration of its taint. Kueue copies the template into its Workload, and
// its TAS node controller judges a node only by the tolerations written there: without
// the pool's toleration it takes the pool's own taint for a node failure and evicts the
// gang (docs/queueing.md, "A TAS gang on an exclusive pool").
//
// It is a convenience, never the rule: the Job's pods still meet P1-P6 at their
// creation, so its failure policy is Ignore, and a template the pod rules would refuse
// is admitted unchanged with the refusal as a warning.
type JobHandler struct {
	Catalog Catalog
	// Accelerators says which resources P5 judges; the zero value is the known set.
	Accelerators policy.Accelerators
}

// Handle implements admission.Handler.
func (h *JobHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		observe(hookJobs, nil, OutcomeAllowed, start)
		return admission.Allowed("litepool completes Job templates only on create")
	}
	var job batchv1.Job
	if err := decode(req.Object, &job); err != nil {
		return allowUnjudged(ctx, hookJobs, start, fmt.Errorf("decoding the Job: %w", err))
	}
	namespace := job.Namespace
	if namespace == "" {
		namespace = req.Namespace
	}
	cat := h.Catalog.forRequest(ctx)
	cat.podRules = true
	ns := cat.Namespace(namespace)
	if cat.err == nil && ns == nil {
		return allowUnjudged(ctx, hookJobs, start, fmt.Errorf("namespace %q is not in the webhook's cache yet", namespace))
	}
	pod := templatePod(&job, namespace)
	patch, warnings, err := policy.MutatePod(pod, ns, cat, h.Accelerators)
	if cat.err != nil {
		return allowUnjudged(ctx, hookJobs, start, fmt.Errorf("reading the informer cache: %w", cat.err))
	}
	if err != nil {
		// Refusing the Job would be a new rule on Jobs; its pods meet this refusal at
		// their creation. Said now, so that the author need not find it in the Job's events.
		observe(hookJobs, nil, OutcomeAllowed, start)
		return admission.Allowed("").WithWarnings(append(warnings,
			fmt.Sprintf("litepool left the Job's pod template unchanged: its pods will be refused at creation: %v", err))...)
	}
	ops := templatePatchOps(pod, patch, templateHasMetadata(req.Object.Raw))
	if len(ops) == 0 {
		observe(hookJobs, nil, OutcomeAllowed, start)
		return admission.Allowed("").WithWarnings(warnings...)
	}
	observe(hookJobs, []string{"P1"}, OutcomeMutated, start)
	return admission.Patched("", ops...).WithWarnings(warnings...)
}

// templatePod is the pod the Job's controller will make of its template, as the pod
// rules see it: the template's labels and spec, in the Job's namespace, owned by the
// Job (so that P3 infers the training type as it will for the pods).
func templatePod(job *batchv1.Job, namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, Controller: ptr.To(true)}}},
		Spec: job.Spec.Template.Spec,
	}
}

// templatePatchOps writes P1's placement (labels, nodeSelector, tolerations) as
// operations on the Job's spec.template. The HCCL environment is left to the pods: the
// pool's settings are read at each pod's creation, and a value written into a template
// that outlives a change of them would become a P1 conflict for the Job's later pods.
// A template sent without metadata takes its labels as a whole metadata object (a JSON
// patch cannot add below a member that is absent).
func templatePatchOps(pod *corev1.Pod, p policy.PodPatch, hasMetadata bool) []jsonpatch.JsonPatchOperation {
	p.Env = nil
	var ops []jsonpatch.JsonPatchOperation
	if !hasMetadata && len(p.Labels) > 0 {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/template/metadata", map[string]any{"labels": p.Labels}))
		p.Labels = nil
	}
	for _, op := range podPatchOps(pod, p) {
		op.Path = "/spec/template" + op.Path
		ops = append(ops, op)
	}
	return ops
}

// templateHasMetadata says whether the Job as sent has spec.template.metadata.
func templateHasMetadata(raw []byte) bool {
	var j struct {
		Spec struct {
			Template struct {
				Metadata json.RawMessage `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	return json.Unmarshal(raw, &j) == nil && len(j.Spec.Template.Metadata) > 0 && string(j.Spec.Template.Metadata) != "null"
}
