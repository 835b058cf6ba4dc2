package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// newWebhook serves h as controller-runtime's admission webhook does, but reads the
// AdmissionReview in one pass (reviewServer) and builds each request's logger lazily
// (lazyLogConstructor).
func newWebhook(h admission.Handler) http.Handler {
	return reviewServer{wh: &admission.Webhook{Handler: h, LogConstructor: lazyLogConstructor}}
}

// maxReviewSize is controller-runtime's limit on a review: two objects of at most 3 MB
// (etcd's request limit, doubled for JSON) and 1 MB for the rest.
const maxReviewSize = 7 << 20

// reviewServer is controller-runtime's admission.Webhook.ServeHTTP with the review
// decoded by one case-sensitive JSON pass into the v1 type. controller-runtime's decoder
// (the scheme's universal deserializer) first unmarshals the whole body once more only to
// read apiVersion and kind: 10% of litepool-webhook's CPU during pod creates (issue
// 43's profile). It accepts what that decoder accepted of an AdmissionReview of
// admission.k8s.io v1 or v1beta1 (whose fields are v1's), as application/json, of at
// most 7 MB, and answers in the request's version; it refuses, saying what it expects,
// a body of another kind or version (which that decoder took for a v1 review). Everything else (panics, the response's
// uid and patch, the logger in the context) is the Webhook's Handle.
type reviewServer struct{ wh *admission.Webhook }

var reviewVersions = map[schema.GroupVersion]bool{admissionv1.SchemeGroupVersion: true, admissionv1beta1.SchemeGroupVersion: true}

func (s reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req admission.Request
	gvk, status, err := readReview(r, &req)
	if err != nil {
		logf.Log.WithName("admission").Error(err, "bad request", "path", r.URL.Path)
		s.write(w, admission.Errored(status, err), nil)
		return
	}
	s.write(w, s.wh.Handle(r.Context(), req), gvk)
}

// readReview decodes the review r carries into req, or says what was wrong with it and
// the HTTP status that says so.
func readReview(r *http.Request, req *admission.Request) (*schema.GroupVersionKind, int32, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, http.StatusBadRequest, errors.New("request body is empty")
	}
	defer r.Body.Close()
	limited := &io.LimitedReader{R: r.Body, N: maxReviewSize + 1}
	body, err := io.ReadAll(limited)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) > maxReviewSize {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewSize)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return nil, http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	review := admissionv1.AdmissionReview{Request: &req.AdmissionRequest}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	gvk := review.GroupVersionKind()
	if gvk.Kind != "AdmissionReview" || !reviewVersions[gvk.GroupVersion()] {
		return nil, http.StatusBadRequest, fmt.Errorf("the request is a %q of %q: expected an AdmissionReview of %s or %s",
			gvk.Kind, gvk.GroupVersion(), admissionv1.SchemeGroupVersion, admissionv1beta1.SchemeGroupVersion)
	}
	if review.Request == nil {
		return nil, http.StatusBadRequest, errors.New("the AdmissionReview carries no request")
	}
	return &gvk, 0, nil
}

// write answers with resp as an AdmissionReview of gvk (v1 when nil).
func (s reviewServer) write(w http.ResponseWriter, resp admission.Response, gvk *schema.GroupVersionKind) {
	review := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	review.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
	if gvk != nil {
		review.SetGroupVersionKind(*gvk)
	}
	if err := json.NewEncoder(w).Encode(review); err != nil {
		logf.Log.WithName("admission").Error(err, "unable to encode and write the response")
	}
}
