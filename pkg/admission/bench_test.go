package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// indexerReader is a client.Reader over client-go indexers, read the way the
// controller-runtime informer cache reads with UnsafeDisableDeepCopy: a map lookup or
// an index lookup, no copy. Benchmarks use it so that they measure the handlers, not
// the fake client's deep copies.
type indexerReader struct {
	stores map[reflect.Type]toolscache.Indexer
}

func newIndexerReader() *indexerReader {
	r := &indexerReader{stores: map[reflect.Type]toolscache.Indexer{}}
	indexers := map[reflect.Type]toolscache.Indexers{}
	for _, ix := range Indexes {
		t := reflect.TypeOf(ix.Obj)
		if indexers[t] == nil {
			indexers[t] = toolscache.Indexers{}
		}
		extract := ix.Extract
		indexers[t]["field:"+ix.Field] = func(o any) ([]string, error) { return extract(o.(client.Object)), nil }
	}
	for _, obj := range append(CachedObjects(), &corev1.Pod{}) {
		t := reflect.TypeOf(obj)
		r.stores[t] = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers[t])
	}
	return r
}

// GetInformer hands out the store as the manager's cache hands out an informer, so
// that the catalog reads index values the way it does in the webhook. Only GetIndexer
// is implemented.
func (r *indexerReader) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return storeInformer{idx: r.stores[reflect.TypeOf(obj)]}, nil
}

type storeInformer struct {
	cache.Informer
	idx toolscache.Indexer
}

func (s storeInformer) GetIndexer() toolscache.Indexer { return s.idx }

func (r *indexerReader) add(objs ...client.Object) {
	for _, o := range objs {
		if err := r.stores[reflect.TypeOf(o)].Add(o); err != nil {
			panic(err)
		}
	}
}

var listTypes = map[reflect.Type]reflect.Type{
	reflect.TypeOf(&corev1.PodList{}):       reflect.TypeOf(&corev1.Pod{}),
	reflect.TypeOf(&corev1.NodeList{}):      reflect.TypeOf(&corev1.Node{}),
	reflect.TypeOf(&v1alpha1.PoolList{}):    reflect.TypeOf(&v1alpha1.Pool{}),
	reflect.TypeOf(&corev1.NamespaceList{}): reflect.TypeOf(&corev1.Namespace{}),
}

func (r *indexerReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	store := r.stores[reflect.TypeOf(obj)]
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + key.Name
	}
	item, ok, _ := store.GetByKey(k)
	if !ok {
		return notFound(key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(item).Elem())
	return nil
}

func (r *indexerReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	store := r.stores[listTypes[reflect.TypeOf(list)]]
	var items []any
	if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
		req := lo.FieldSelector.Requirements()[0]
		items, _ = store.ByIndex("field:"+req.Field, req.Value)
	} else {
		items = store.List()
	}
	objs := make([]runtime.Object, len(items))
	for i, it := range items {
		objs[i] = it.(runtime.Object)
	}
	return meta.SetList(list, objs)
}

func notFound(name string) error {
	return &apiNotFound{name}
}

type apiNotFound struct{ name string }

func (e *apiNotFound) Error() string { return fmt.Sprintf("%q not found", e.name) }
func (e *apiNotFound) Status() metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound}
}

var _ schema.ObjectKind = &metav1.TypeMeta{}

// benchCluster is a large cluster: 1000 nodes in 20 pools of 50, 20 pods per node.
func benchCluster() Catalog {
	r := newIndexerReader()
	for p := 0; p < 20; p++ {
		name := fmt.Sprintf("pool-%02d", p)
		pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 2,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"},
			HCCL:        v1alpha1.HCCLSpec{OpRetry: v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}}}}
		r.add(pool)
		for n := 0; n < 50; n++ {
			node := testNode(fmt.Sprintf("%s-node-%02d", name, n), "Snt9B", name)
			r.add(node)
			for i := 0; i < 20; i++ {
				r.add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", node.Name, i), Namespace: "ai-team",
					Labels: map[string]string{policy.LabelPool: name}}, Spec: corev1.PodSpec{NodeName: node.Name}})
			}
		}
	}
	r.add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ai-team"}})
	return Catalog{Reader: r}
}

// BenchmarkAdmission measures one request through controller-runtime's webhook HTTP
// handler (decode the AdmissionReview, judge, encode the answer), against a cache of
// 1000 nodes and 20000 pods. Baseline: the same path with a handler that allows
// everything, i.e. what any controller-runtime webhook costs before its rules.
func BenchmarkAdmission(b *testing.B) {
	c := benchCluster()
	npuPod := pod("pangu", map[string]string{policy.LabelPool: "pool-07", policy.LabelWorkloadType: "training"},
		corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8")})
	badPod := pod("lost", map[string]string{policy.LabelPool: "pool-99", policy.LabelWorkloadType: "training"}, nil)
	member := testNode("pool-03-node-07", "Snt9B", "pool-03")
	relabelled := member.DeepCopy()
	relabelled.Labels[policy.LabelHealth] = policy.HealthHealthy
	left := member.DeepCopy()
	delete(left.Labels, policy.LabelPool)
	cases := []struct {
		name string
		h    admission.Handler
		req  admissionv1.AdmissionRequest
	}{
		{"baseline-allow-all", admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }), podRequest(b, npuPod)},
		{"pod-mutate-P1-HCCL", &PodHandler{Catalog: c}, podRequest(b, npuPod)},
		{"pod-deny-P2", &PodHandler{Catalog: c}, podRequest(b, badPod)},
		{"node-label-N1-N2", &NodeHandler{Catalog: c}, nodeRequest(b, admissionv1.Update, relabelled, member)},
		{"node-leave-N3-deny", &NodeHandler{Catalog: c}, nodeRequest(b, admissionv1.Update, left, member)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			tc.req.UID = "bench"
			body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &tc.req})
			if err != nil {
				b.Fatal(err)
			}
			wh := newWebhook(tc.h) // as Register serves it
			if tc.name == "baseline-allow-all" {
				wh = &admission.Webhook{Handler: tc.h} // controller-runtime's as it comes
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				wh.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("HTTP %d", rec.Code)
				}
			}
		})
	}
}
