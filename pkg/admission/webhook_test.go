package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// reviewServer answers a review as controller-runtime's Webhook.ServeHTTP does (the same
// answer, patch and version of the answer), refuses what it refuses (with the same
// code, its own words, and the answer typed as v1), and also refuses a review that is
// not an AdmissionReview of admission.k8s.io/v1 or v1beta1 or carries a null request,
// saying so, which controller-runtime judged as one (or as an empty request).
func TestReviewServerAnswersAsControllerRuntime(t *testing.T) {
	npu := pod("pangu", map[string]string{policy.LabelPool: "pool-07", policy.LabelWorkloadType: "training"},
		corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8")})
	req := podRequest(t, npu)
	req.UID = "u-1"
	reqJSON, err := json.Marshal(req)
	require.NoError(t, err)
	review := func(apiVersion string) string {
		return `{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":` + string(reqJSON) + `}`
	}
	handler := &PodHandler{Catalog: benchCluster()}
	cases := []struct {
		name, body, contentType string
		// refused: both refuse it; refusedHere: only reviewServer does, with 400.
		refused, refusedHere bool
	}{
		{name: "v1, mutated", body: review("admission.k8s.io/v1")},
		{name: "v1beta1, answered in v1beta1", body: review("admission.k8s.io/v1beta1")},
		{name: "not JSON", body: `{"apiVersion":`, refused: true},
		{name: "another content type", body: review("admission.k8s.io/v1"), contentType: "application/yaml", refused: true},
		{name: "empty body", refused: true},
		{name: "larger than 7 MB", body: review("admission.k8s.io/v1") + strings.Repeat(" ", 7<<20), refused: true},
		{name: "another kind", body: strings.Replace(review("admission.k8s.io/v1"), `"AdmissionReview"`, `"ConversionReview"`, 1), refusedHere: true},
		{name: "another version", body: review("admission.k8s.io/v2"), refusedHere: true},
		{name: "no apiVersion or kind", body: `{"request":` + string(reqJSON) + `}`, refusedHere: true},
		{name: "a null request", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`, refusedHere: true},
		{name: "field names in another case", body: strings.Replace(review("admission.k8s.io/v1"), `"object"`, `"Object"`, 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			serve := func(h http.Handler) (int, map[string]any) {
				r := httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader([]byte(tc.body)))
				if tc.body == "" {
					r.Body = http.NoBody
				}
				r.Header.Set("Content-Type", ct)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				var out map[string]any
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out), w.Body.String())
				return w.Code, out
			}
			code, got := serve(newWebhook(handler))
			wantCode, want := serve(&admission.Webhook{Handler: handler})
			assert.Equal(t, wantCode, code)
			resp, wantResp := got["response"].(map[string]any), want["response"].(map[string]any)
			switch {
			case tc.refused:
				assert.Equal(t, false, resp["allowed"])
				assert.Equal(t, wantResp["allowed"], resp["allowed"])
				assert.Equal(t, wantResp["status"].(map[string]any)["code"], resp["status"].(map[string]any)["code"])
				assert.Equal(t, "admission.k8s.io/v1", got["apiVersion"])
			case tc.refusedHere:
				assert.Equal(t, false, resp["allowed"])
				assert.EqualValues(t, http.StatusBadRequest, resp["status"].(map[string]any)["code"])
				assert.NotEqual(t, false, wantResp["allowed"], "controller-runtime judged this one")
			default:
				assert.Equal(t, want, got)
			}
		})
	}
	_, v1beta1 := func() (int, map[string]any) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(review("admission.k8s.io/v1beta1")))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		newWebhook(handler).ServeHTTP(w, r)
		var out map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
		return w.Code, out
	}()
	assert.Equal(t, "admission.k8s.io/v1beta1", v1beta1["apiVersion"])
	assert.NotEmpty(t, v1beta1["response"].(map[string]any)["patch"], "the NPU pod is mutated")
}

// A panic in a handler is answered, not propagated, as by controller-runtime.
func TestReviewServerRecoversPanics(t *testing.T) {
	h := newWebhook(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { panic("boom") }))
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-2"}}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
	require.NotNil(t, out.Response)
	assert.False(t, out.Response.Allowed)
	assert.Equal(t, "u-2", string(out.Response.UID))
	assert.Contains(t, out.Response.Result.Message, "panic: boom")
}
