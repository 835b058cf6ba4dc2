package admission

import (
	"context"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/queue"
)

// PathVolcano judges Volcano Jobs and PodGroups that name a pool's Volcano queue (P4).
const PathVolcano = "/validate-volcano-queue"

const hookVolcano = "volcano"

// VolcanoHandler is the validating webhook of rule P4 for Volcano's queue objects: a
// Job (batch.volcano.sh) or PodGroup (scheduling.volcano.sh) naming a pool's Volcano
// Queue (spec.queue) from a namespace the pool does not admit is refused.
type VolcanoHandler struct{ Catalog Catalog }

// Handle implements admission.Handler.
func (h *VolcanoHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update || req.SubResource != "" {
		observe(hookVolcano, nil, OutcomeAllowed, start)
		return admission.Allowed("")
	}
	obj := &unstructured.Unstructured{}
	if err := decode(req.Object, &obj.Object); err != nil {
		return errorf(hookVolcano, start, http.StatusBadRequest, "decoding the %s: %v", req.Kind.Kind, err)
	}
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "queue")
	if name == "" {
		observe(hookVolcano, nil, OutcomeAllowed, start)
		return admission.Allowed("")
	}
	cat := h.Catalog.forRequest(ctx)
	var pool *v1alpha1.Pool
	if info, _ := cat.Pool(name); info.Object != nil {
		pool = info.Object
	}
	err := policy.CheckQueueSubmission(req.Kind.Kind, req.Namespace, name, pool, cat.Namespace(req.Namespace))
	if cat.err != nil {
		return errorf(hookVolcano, start, http.StatusInternalServerError, "reading the informer cache: %v", cat.err)
	}
	if err != nil {
		return deny(ctx, hookVolcano, start, err, nil)
	}
	observe(hookVolcano, nil, OutcomeAllowed, start)
	return admission.Allowed("")
}

// queueHolder is what the API server holds of the Volcano Queue the pool's queue would
// take the name of. A read that fails says nothing is known: the controller still never
// writes a Queue it does not own, and its Queue condition names the holder.
func (h *PoolHandler) queueHolder(ctx context.Context, pool *v1alpha1.Pool) policy.QueueHolder {
	holder := policy.QueueHolder{Kind: queue.VolcanoQueue.Kind}
	if pool.Spec.Queue.Scheduler != v1alpha1.QueueVolcano {
		return holder
	}
	r := h.Live
	if r == nil {
		r = h.Catalog.Reader
	}
	q := &unstructured.Unstructured{}
	q.SetGroupVersionKind(queue.VolcanoQueue)
	if err := r.Get(ctx, client.ObjectKey{Name: pool.Name}, q); err != nil {
		if client.IgnoreNotFound(err) != nil {
			log.FromContext(ctx).Info("could not read the Volcano Queue a pool's queue takes the name of", "pool", pool.Name, "error", err.Error())
		}
		return holder
	}
	holder.Exists, holder.Owned = true, queue.OwnedBy(q, pool)
	return holder
}
