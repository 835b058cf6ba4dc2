package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// wellFormed checks what the API server needs from any answer: HTTP 200, an
// AdmissionReview with a response, the request's UID echoed, and a denial that explains
// itself.
func wellFormed(t *testing.T, rec *httptest.ResponseRecorder, uid string) {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d", rec.Code)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v\n%s", err, rec.Body.String())
	}
	if out.Response == nil {
		t.Fatalf("answer has no response: %s", rec.Body.String())
	}
	if uid != "" && string(out.Response.UID) != uid {
		t.Fatalf("answer UID %q, request UID %q", out.Response.UID, uid)
	}
	if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
		t.Fatalf("denial without a message: %s", rec.Body.String())
	}
	if len(out.Response.Patch) > 0 && !json.Valid(out.Response.Patch) {
		t.Fatalf("patch is not JSON: %s", out.Response.Patch)
	}
}

func serve(t *testing.T, h admission.Handler, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	(&admission.Webhook{Handler: h}).ServeHTTP(rec, req)
	return rec
}

func handlers(t testing.TB) []admission.Handler {
	c := fixture(t)
	return []admission.Handler{&PodHandler{Catalog: c}, &NodeHandler{Catalog: c}, &PoolHandler{Catalog: c}}
}

// FuzzAdmissionReview sends arbitrary bodies: malformed reviews must get a well-formed
// answer, never a panic.
func FuzzAdmissionReview(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"request":null}`, `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u"}}`,
		`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","object":{"metadata":{"labels":{"runwhere.ai/pool":"train-a100"}}}}}`,
		`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u","kind":{"kind":"Node"},"operation":"DELETE"}}`,
		`{"request":{"object":"x"}}`, "\x00\xff",
	} {
		f.Add([]byte(seed))
	}
	hs := handlers(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, h := range hs {
			wellFormed(t, serve(t, h, body), "")
		}
	})
}

// FuzzAdmissionObjects sends well-formed reviews carrying odd objects, kinds and
// operations to every handler.
func FuzzAdmissionObjects(f *testing.F) {
	pod := `{"metadata":{"name":"p","labels":{"runwhere.ai/pool":"train-snt9b","runwhere.ai/workload-type":"training"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"huawei.com/Ascend910":"8"}},"env":[{"name":"HCCL_OP_RETRY_ENABLE","valueFrom":{}}]}],"nodeSelector":{"runwhere.ai/pool":"x"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"runwhere.ai/pool","operator":"Gt"}]}]}}}}}`
	node := `{"metadata":{"name":"a100-node-1","labels":{"runwhere.ai/pool":"train-a100","pool":"x","runwhere.ai/gpu-type":""},"annotations":{"runwhere.ai/force":":"}}}`
	pool := `{"metadata":{"name":"train-a100","annotations":{"runwhere.ai/confirm-delete":"train-a100"}},"spec":{"type":"Batch","minNodes":-1,"namespaceSelector":{"matchExpressions":[{"key":"a","operator":"Bad"}]}}}`
	for _, kind := range []string{"Pod", "Node", "Pool", ""} {
		for _, op := range []string{"CREATE", "UPDATE", "DELETE", "CONNECT", ""} {
			for _, obj := range []string{pod, node, pool, `{}`, `null`, `{"metadata":{"labels":{"runwhere.ai/pool":"default"}}}`} {
				f.Add(kind, op, "", []byte(obj), []byte(obj))
			}
		}
	}
	f.Add("Pod", "CREATE", "status", []byte(pod), []byte(`[]`))
	hs := handlers(f)
	f.Fuzz(func(t *testing.T, kind, op, sub string, obj, old []byte) {
		req := admissionv1.AdmissionRequest{UID: "fuzz", Kind: metav1.GroupVersionKind{Kind: kind}, Operation: admissionv1.Operation(op),
			SubResource: sub, Namespace: "ai-team", Name: "n"}
		if json.Valid(obj) {
			req.Object = runtime.RawExtension{Raw: obj}
		}
		if json.Valid(old) {
			req.OldObject = runtime.RawExtension{Raw: old}
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
		if err != nil {
			t.Skip("not encodable as a review") // raw JSON the encoder itself refuses
		}
		for _, h := range hs {
			wellFormed(t, serve(t, h, body), "fuzz")
		}
	})
}
