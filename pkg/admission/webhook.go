package admission

import (
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// newWebhook serves h as controller-runtime's admission webhook, with each request's
// logger built lazily (lazyLogConstructor).
func newWebhook(h admission.Handler) *admission.Webhook {
	return &admission.Webhook{Handler: h, LogConstructor: lazyLogConstructor}
}
