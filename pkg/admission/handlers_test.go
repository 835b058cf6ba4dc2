package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// fixture is a small cluster: the e2e fixture's pools, some nodes and pods.
func fixture(t testing.TB) Catalog {
	t.Helper()
	objs := []client.Object{
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 2,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G", ResourceName: "nvidia.com/gpu"}}},
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-snt9b"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"},
			HCCL:        v1alpha1.HCCLSpec{OpRetry: v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}}}},
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "dev-sandbox"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Exclusive: true,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A10-24G"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ai-team"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "notebooks", Labels: map[string]string{policy.LabelPool: "dev-sandbox"}}},
	}
	for i, n := range []string{"a100-node-1", "a100-node-2", "a100-node-3"} {
		objs = append(objs, testNode(n, "A100-80G", "train-a100"))
		if i == 0 {
			objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "llama-train-0", Namespace: "ai-team", Labels: map[string]string{policy.LabelPool: "train-a100"}},
				Spec: corev1.PodSpec{NodeName: n}})
		}
	}
	objs = append(objs, testNode("a10-node-1", "A10-24G", "infer-a10"), testNode("a10-node-3", "A10-24G", ""),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-exporter", Namespace: "monitoring",
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ne", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "a100-node-2"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: "ai-team", Labels: map[string]string{policy.LabelPool: "train-a100"}}})
	return catalogOf(t, objs...)
}

// catalogOf is a Catalog over a fake client holding objs, with the webhook's indexes.
func catalogOf(t testing.TB, objs ...client.Object) Catalog {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	for _, ix := range Indexes {
		b = b.WithIndex(ix.Obj, ix.Field, ix.Extract)
	}
	return Catalog{Reader: b.Build()}
}

func testNode(name, gpuType, pool string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelGPUType: gpuType}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if pool != "" {
		n.Labels[policy.LabelPool] = pool
	}
	return n
}

func raw(t testing.TB, obj any) runtime.RawExtension {
	if obj == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return runtime.RawExtension{Raw: b}
}

// review sends an AdmissionReview through the webhook's HTTP handler, as the API server
// does, and returns the answer.
func review(t testing.TB, h admission.Handler, req admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	req.UID = types.UID("req-1")
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	hr := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	(&admission.Webhook{Handler: h}).ServeHTTP(rec, hr)
	require.Equal(t, http.StatusOK, rec.Code)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.NotNil(t, out.Response)
	assert.Equal(t, req.UID, out.Response.UID)
	return out.Response
}

func podRequest(t testing.TB, pod *corev1.Pod) admissionv1.AdmissionRequest {
	return admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "ai-team",
		Operation: admissionv1.Create, Object: raw(t, pod)}
}

func pod(name string, labels map[string]string, res corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: res}}}}}
}

// applied applies the answer's JSON patch to the pod that was sent.
func applied(t testing.TB, sent *corev1.Pod, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	out := &corev1.Pod{}
	doc := raw(t, sent).Raw
	if len(resp.Patch) > 0 {
		require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
		p, err := jsonpatchapply.DecodePatch(resp.Patch)
		require.NoError(t, err)
		doc, err = p.Apply(doc)
		require.NoError(t, err)
	}
	require.NoError(t, json.Unmarshal(doc, out))
	return out
}

func TestPodHandler(t *testing.T) {
	h := &PodHandler{Catalog: fixture(t)}
	npu := corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8")}
	training := func(pool string) map[string]string {
		return map[string]string{policy.LabelPool: pool, policy.LabelWorkloadType: "training"}
	}

	t.Run("P1 HCCL env for an NPU pod in a pool with retry on", func(t *testing.T) {
		sent := pod("pangu", training("train-snt9b"), npu)
		resp := review(t, h, podRequest(t, sent))
		require.True(t, resp.Allowed)
		got := applied(t, sent, resp)
		assert.Equal(t, map[string]string{policy.LabelPool: "train-snt9b"}, got.Spec.NodeSelector)
		assert.Equal(t, []corev1.EnvVar{{Name: "HCCL_OP_RETRY_ENABLE", Value: "L0:0, L1:1, L2:1"}, {Name: "HCCL_OP_RETRY_PARAMS", Value: "MaxCnt:3,HoldTime:60000,IntervalTime:1000"}},
			got.Spec.Containers[0].Env)
		// Reinvocation: the patched pod comes back and gets nothing more.
		again := review(t, h, podRequest(t, got))
		assert.True(t, again.Allowed)
		assert.Empty(t, again.Patch)
	})
	t.Run("P1 exact patch for a pod with existing maps", func(t *testing.T) {
		sent := pod("p", training("train-a100"), nil)
		sent.Spec.NodeSelector = map[string]string{"zone": "a"}
		resp := review(t, h, podRequest(t, sent))
		assert.JSONEq(t, `[{"op":"add","path":"/spec/nodeSelector/runwhere.ai~1pool","value":"train-a100"}]`, string(resp.Patch))
	})
	t.Run("P1 exclusive pool and namespace default pool", func(t *testing.T) {
		sent := pod("nb", map[string]string{policy.LabelWorkloadType: "development"}, nil)
		req := podRequest(t, sent)
		req.Namespace = "notebooks"
		resp := review(t, h, req)
		require.True(t, resp.Allowed, "%v", resp.Result)
		assert.JSONEq(t, `[{"op":"add","path":"/metadata/labels/runwhere.ai~1pool","value":"dev-sandbox"},
			{"op":"add","path":"/spec/nodeSelector","value":{"runwhere.ai/pool":"dev-sandbox"}},
			{"op":"add","path":"/spec/tolerations","value":[{"key":"runwhere.ai/pool","operator":"Equal","value":"dev-sandbox","effect":"NoSchedule"}]}]`, string(resp.Patch))
	})
	t.Run("P1 conflict denied", func(t *testing.T) {
		sent := pod("p", training("train-a100"), nil)
		sent.Spec.NodeSelector = map[string]string{policy.LabelPool: "infer-a10"}
		resp := review(t, h, podRequest(t, sent))
		assert.False(t, resp.Allowed)
		assert.Equal(t, int32(http.StatusForbidden), resp.Result.Code)
		assert.Equal(t, `[P1] nodeSelector runwhere.ai/pool=infer-a10 conflicts with pool "train-a100", which needs runwhere.ai/pool=train-a100: remove it or make it runwhere.ai/pool=train-a100 (litepool never overwrites it)`, resp.Result.Message)
	})
	t.Run("P2 unknown pool lists the pools, objects and labels", func(t *testing.T) {
		resp := review(t, h, podRequest(t, pod("p", training("train-h100"), nil)))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[P2] pool "train-h100" (label runwhere.ai/pool) does not exist: ask for a pool that exists (kubectl litepool get pools) or remove the label`, resp.Result.Message)
	})
	t.Run("P3 warning passes through", func(t *testing.T) {
		resp := review(t, h, podRequest(t, pod("p", map[string]string{policy.LabelPool: "train-a100"}, nil)))
		assert.True(t, resp.Allowed)
		assert.Equal(t, []string{`[P3] pod declares no workload type: set label runwhere.ai/workload-type to one that pool "train-a100" accepts (training, development)`}, resp.Warnings)
	})
	t.Run("pods outside pools and updates pass untouched", func(t *testing.T) {
		resp := review(t, h, podRequest(t, pod("p", nil, nil)))
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patch)
		req := podRequest(t, pod("p", training("train-h100"), nil))
		req.Operation = admissionv1.Update
		assert.True(t, review(t, h, req).Allowed)
	})
	t.Run("dry run is judged the same", func(t *testing.T) {
		req := podRequest(t, pod("p", training("train-a100"), nil))
		req.DryRun = ptr.To(true)
		resp := review(t, h, req)
		assert.True(t, resp.Allowed)
		assert.JSONEq(t, `[{"op":"add","path":"/spec/nodeSelector","value":{"runwhere.ai/pool":"train-a100"}}]`, string(resp.Patch))
	})
	t.Run("namespace not in the cache yet: refused, to be retried", func(t *testing.T) {
		req := podRequest(t, pod("p", training("train-a100"), nil))
		req.Namespace = "brand-new"
		resp := review(t, h, req)
		assert.False(t, resp.Allowed)
		assert.Equal(t, int32(http.StatusInternalServerError), resp.Result.Code)
		assert.Equal(t, `namespace "brand-new" is not in the webhook's cache yet; retry in a moment`, resp.Result.Message)
	})
	t.Run("malformed pod", func(t *testing.T) {
		req := podRequest(t, nil)
		req.Object = runtime.RawExtension{Raw: []byte(`{"spec":5}`)}
		resp := review(t, h, req)
		assert.False(t, resp.Allowed)
		assert.Equal(t, int32(http.StatusBadRequest), resp.Result.Code)
	})
}

func nodeRequest(t testing.TB, op admissionv1.Operation, node, old *corev1.Node) admissionv1.AdmissionRequest {
	name := ""
	if node != nil {
		name = node.Name
	} else if old != nil {
		name = old.Name
	}
	return admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: name,
		Operation: op, Object: raw(t, node), OldObject: raw(t, old)}
}

func TestNodeHandler(t *testing.T) {
	h := &NodeHandler{Catalog: fixture(t)}
	busy := testNode("a100-node-1", "A100-80G", "train-a100")
	left := busy.DeepCopy()
	delete(left.Labels, policy.LabelPool)

	t.Run("N1 look-alike denied", func(t *testing.T) {
		n := busy.DeepCopy()
		n.Labels["pool"] = "train-a100"
		resp := review(t, h, nodeRequest(t, admissionv1.Update, n, busy))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[N1] label key "pool" looks like litepool's "runwhere.ai/pool": use "runwhere.ai/pool" (node "a100-node-1")`, resp.Result.Message)
	})
	t.Run("N2 cross-type join denied", func(t *testing.T) {
		old := testNode("a10-node-3", "A10-24G", "")
		resp := review(t, h, nodeRequest(t, admissionv1.Update, testNode("a10-node-3", "A10-24G", "train-a100"), old))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[N2] node "a10-node-3" (gpu-type A10-24G) cannot join pool "train-a100": the pool takes only A100-80G nodes; choose a node labelled runwhere.ai/gpu-type=A100-80G or a pool for A10-24G nodes`, resp.Result.Message)
	})
	t.Run("N3 busy node leaves: denied; DaemonSet pods do not count", func(t *testing.T) {
		resp := review(t, h, nodeRequest(t, admissionv1.Update, left, busy))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`, resp.Result.Message)
		resp = review(t, h, nodeRequest(t, admissionv1.Delete, nil, busy))
		assert.False(t, resp.Allowed)
	})
	t.Run("N3 below minNodes", func(t *testing.T) {
		// a100-node-2 runs only a DaemonSet pod; the pool has 3 nodes and minNodes 2.
		old := testNode("a100-node-2", "A100-80G", "train-a100")
		resp := review(t, h, nodeRequest(t, admissionv1.Delete, nil, old))
		assert.True(t, resp.Allowed, "%v", resp.Result)
	})
	t.Run("N3 forced: allowed with a warning and audit annotations", func(t *testing.T) {
		n := left.DeepCopy()
		n.Annotations = map[string]string{policy.AnnotationForce: "alice: PSU swap"}
		resp := review(t, h, nodeRequest(t, admissionv1.Update, n, busy))
		assert.True(t, resp.Allowed)
		overridden := `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`
		assert.Equal(t, map[string]string{"n3-forced-by": "alice", "n3-forced-reason": "PSU swap", "n3-overridden": overridden}, resp.AuditAnnotations)
		require.Len(t, resp.Warnings, 1)
		assert.Contains(t, resp.Warnings[0], "[N3] forced by alice (PSU swap)")
	})
	t.Run("a label change through nodes/status is judged like an update", func(t *testing.T) {
		req := nodeRequest(t, admissionv1.Update, left, busy)
		req.SubResource = "status"
		resp := review(t, h, req)
		assert.False(t, resp.Allowed)
		assert.Contains(t, resp.Result.Message, `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s)`)
		req.SubResource = "proxy"
		assert.True(t, review(t, h, req).Allowed, "other subresources are not judged")
	})
	t.Run("N3 last node of a pool of labels only: the pool dissolves", func(t *testing.T) {
		old := testNode("a10-node-1", "A10-24G", "infer-a10")
		resp := review(t, h, nodeRequest(t, admissionv1.Delete, nil, old))
		assert.True(t, resp.Allowed, "%v", resp.Result)
		assert.Equal(t, []string{`[N3] node "a10-node-1" was the last node of pool "infer-a10", a pool of labels only (no Pool object): the pool is gone; label a node runwhere.ai/pool=infer-a10 to make it again, or create a Pool object to give it a floor (minNodes)`}, resp.Warnings)
	})
	t.Run("N3 floor counts Ready members: a NotReady member goes, a Ready one stays", func(t *testing.T) {
		c := fixture(t)
		cl := c.Reader.(client.Client)
		for _, n := range []string{"a100-node-3"} { // train-a100: 2 Ready members left of 3, minNodes 2
			var node corev1.Node
			require.NoError(t, cl.Get(context.Background(), client.ObjectKey{Name: n}, &node))
			node.Status.Conditions[0].Status = corev1.ConditionUnknown
			require.NoError(t, cl.Status().Update(context.Background(), &node))
		}
		h := &NodeHandler{Catalog: c}
		notReady := testNode("a100-node-3", "A100-80G", "train-a100")
		notReady.Status.Conditions[0].Status = corev1.ConditionUnknown
		resp := review(t, h, nodeRequest(t, admissionv1.Delete, nil, notReady))
		assert.True(t, resp.Allowed, "%v", resp.Result)
		resp = review(t, h, nodeRequest(t, admissionv1.Delete, nil, testNode("a100-node-2", "A100-80G", "train-a100")))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[N3] node "a100-node-2" cannot leave pool "train-a100": the pool would have 1 Ready node(s), below its minNodes 2; lower spec.minNodes first or add a node (a NotReady member may leave)`, resp.Result.Message)
	})
}

// TestNodeHandlerTerminatingPods: a terminating pod no longer holds its node in the pool
// (the Node of a dead machine, whose pods never finish terminating, can be deleted).
func TestNodeHandlerTerminatingPods(t *testing.T) {
	c := fixture(t)
	ctx := context.Background()
	var p corev1.Pod
	require.NoError(t, c.Reader.Get(ctx, client.ObjectKey{Namespace: "ai-team", Name: "llama-train-0"}, &p))
	p.Finalizers = []string{"e2e/keep"} // the fake client deletes at once without one
	require.NoError(t, c.Reader.(client.Client).Update(ctx, &p))
	require.NoError(t, c.Reader.(client.Client).Delete(ctx, &p))
	h := &NodeHandler{Catalog: c}
	resp := review(t, h, nodeRequest(t, admissionv1.Delete, nil, testNode("a100-node-1", "A100-80G", "train-a100")))
	assert.True(t, resp.Allowed, "%v", resp.Result)
}

func poolRequest(t testing.TB, op admissionv1.Operation, p, old *v1alpha1.Pool) admissionv1.AdmissionRequest {
	return admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Group: "runwhere.ai", Version: "v1alpha1", Kind: "Pool"},
		Resource:  metav1.GroupVersionResource{Group: "runwhere.ai", Version: "v1alpha1", Resource: "pools"},
		Operation: op, Object: raw(t, p), OldObject: raw(t, old)}
}

func TestPoolHandler(t *testing.T) {
	h := &PoolHandler{Catalog: fixture(t)}
	a100 := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 2,
		Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}}

	t.Run("R1 create", func(t *testing.T) {
		bad := a100.DeepCopy()
		bad.Name, bad.Spec.HCCL.OpRetry.MaxRetries = "x", 20
		resp := review(t, h, poolRequest(t, admissionv1.Create, bad, nil))
		assert.False(t, resp.Allowed)
		assert.Equal(t, "[R1] invalid pool name \"x\": it has 1 characters; a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)\n[R1] hccl max retries 20 out of range: must be 1-10", resp.Result.Message)
		assert.True(t, review(t, h, poolRequest(t, admissionv1.Create, a100, nil)).Allowed)
	})
	t.Run("R1 create adopts only members of its accelerator type", func(t *testing.T) {
		a10 := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "infer-a10"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeInference,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}}
		resp := review(t, h, poolRequest(t, admissionv1.Create, a10, nil))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[R1] pool "infer-a10" with accelerator type "A100-80G" cannot adopt the 1 node(s) labelled runwhere.ai/pool=infer-a10 whose gpu-type differs: a10-node-1 (gpu-type A10-24G); set spec.accelerator.type to their gpu-type, or take those nodes out of the pool first`, resp.Result.Message)
		a10.Spec.Accelerator.Type = "A10-24G"
		assert.True(t, review(t, h, poolRequest(t, admissionv1.Create, a10, nil)).Allowed)
	})
	t.Run("R1 accelerator immutable while the pool has nodes", func(t *testing.T) {
		changed := a100.DeepCopy()
		changed.Spec.Accelerator.Type = "H100-80G"
		resp := review(t, h, poolRequest(t, admissionv1.Update, changed, a100))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[R1] accelerator type of pool "train-a100" cannot change from "A100-80G" to "H100-80G" while it has 3 node(s); remove its nodes first`, resp.Result.Message)
	})
	t.Run("R2 delete", func(t *testing.T) {
		resp := review(t, h, poolRequest(t, admissionv1.Delete, nil, a100))
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[R2] pool "train-a100" cannot be deleted: 1 workload pod(s) run on its nodes (ai-team/llama-train-0); wait for them to finish, or confirm with the annotation runwhere.ai/confirm-delete=train-a100 (kubectl litepool delete pool train-a100 --force), which leaves the pods running`, resp.Result.Message)
		confirmed := a100.DeepCopy()
		confirmed.Annotations = map[string]string{policy.AnnotationConfirmDelete: "train-a100"}
		resp = review(t, h, poolRequest(t, admissionv1.Delete, nil, confirmed))
		assert.True(t, resp.Allowed)
		assert.Equal(t, []string{
			`[R2] pool "train-a100" deleted as confirmed by runwhere.ai/confirm-delete; 1 workload pod(s) keep running on its nodes`,
			`[R2] 1 pod(s) that ask for pool "train-a100" are still pending; without the Pool object, pods asking for it are no longer held to its policy (workload types, namespaces, exclusive toleration, HCCL)`,
		}, resp.Warnings)
		empty := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "dev-sandbox"}}
		assert.True(t, review(t, h, poolRequest(t, admissionv1.Delete, nil, empty)).Allowed)
	})
}

// TestPoolHandlerTopology: R1 on spec.topology, each bad input refused naming the field,
// and a floor above a current domain's members refused naming the domain, read from the
// cache (a100-node-1 and -2 in super pod sp1, a100-node-3 alone in sp2).
func TestPoolHandlerTopology(t *testing.T) {
	objs := []client.Object{&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}}}
	for i, n := range []string{"a100-node-1", "a100-node-2", "a100-node-3"} {
		node := testNode(n, "A100-80G", "train-a100")
		node.Labels["huawei.com/topotree.superpodid"] = map[bool]string{true: "sp1", false: "sp2"}[i < 2]
		node.Labels["huawei.com/topotree.rackid"] = "r1"
		objs = append(objs, node)
	}
	h := &PoolHandler{Catalog: catalogOf(t, objs...)}
	pool := func(top *v1alpha1.TopologySpec) *v1alpha1.Pool {
		return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}, Topology: top}}
	}
	many := make([]string, 16)
	for i := range many {
		many[i] = fmt.Sprintf("level-%d", i)
	}
	for name, tc := range map[string]struct {
		top *v1alpha1.TopologySpec
		msg string
	}{
		"unknown preset": {&v1alpha1.TopologySpec{Preset: "Cray"},
			`[R1] unknown topology preset "Cray": use one of Ascend, EKS, GKE, NVIDIA, Topograph, or list the node label keys in spec.topology.levels`},
		"duplicate level": {&v1alpha1.TopologySpec{Levels: []string{"block", "rack", "block"}},
			`[R1] level "block" is listed twice: each level is a different node label key`},
		"too many levels": {&v1alpha1.TopologySpec{Levels: many},
			`[R1] spec.topology.levels has 16 levels: Kueue takes at most 16 with the implied kubernetes.io/hostname, so list at most 15`},
		"hostname not last": {&v1alpha1.TopologySpec{Levels: []string{corev1.LabelHostname, "rack"}},
			`[R1] kubernetes.io/hostname may only be the last level (it is implied last): remove it or move it to the end`},
		"floor above a domain's size": {&v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2},
			`[R1] spec.topology.minNodesPerDomain 2 is above the members of domain "sp2" (1) of huawei.com/topotree.superpodid: a domain keeps at least that many while it stays in the pool; set it to 1 or less, or add members to those domains first`},
	} {
		t.Run(name, func(t *testing.T) {
			for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
				var old *v1alpha1.Pool
				if op == admissionv1.Update {
					old = pool(nil)
				}
				resp := review(t, h, poolRequest(t, op, pool(tc.top), old))
				assert.False(t, resp.Allowed, op)
				assert.Equal(t, tc.msg, resp.Result.Message, op)
			}
		})
	}
	floor3 := &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 3}
	resp := review(t, h, poolRequest(t, admissionv1.Create, pool(floor3), nil))
	assert.Contains(t, resp.Result.Message, `domain "sp1" (2), "sp2" (1) of huawei.com/topotree.superpodid`)
	assert.Contains(t, resp.Result.Message, "set it to 1 or less")

	ok := &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend}
	assert.True(t, review(t, h, poolRequest(t, admissionv1.Create, pool(ok), nil)).Allowed)
	assert.True(t, review(t, h, poolRequest(t, admissionv1.Update, pool(floor3), pool(floor3))).Allowed,
		"an unchanged topology is not judged again: a domain that lost members does not block other edits")
}

// TestPlacementHandler (P6): a pod bound to a node of the exclusive pool dev-sandbox by
// spec.nodeName or by a binding is denied unless it is the pool's.
func TestPlacementHandler(t *testing.T) {
	c := fixture(t)
	require.NoError(t, c.Reader.(client.Client).Create(context.Background(), testNode("a10-node-9", "A10-24G", "dev-sandbox")))
	h := &PlacementHandler{Catalog: c}
	foreign := pod("squatter", nil, nil)
	foreign.Spec.NodeName = "a10-node-9"
	req := podRequest(t, foreign)
	resp := review(t, h, req)
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, `[P6] pod ai-team/squatter may not run on node "a10-node-9": it is bound to the node`)

	own := pod("nb", map[string]string{policy.LabelPool: "dev-sandbox"}, nil)
	own.Namespace, own.Spec.NodeName = "notebooks", "a10-node-9"
	assert.True(t, review(t, h, podRequest(t, own)).Allowed)

	binding := admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Binding"}, Name: "queued", Namespace: "ai-team",
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "binding", Operation: admissionv1.Create,
		Object: raw(t, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "queued"}, Target: corev1.ObjectReference{Kind: "Node", Name: "a10-node-9"}})}
	resp = review(t, h, binding)
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, `[P6] pod ai-team/queued may not run on node "a10-node-9": it is bound to the node, but the node belongs to exclusive pool "dev-sandbox"`)
	bindings := binding // the same Binding POSTed to the namespace's bindings resource
	bindings.Resource, bindings.SubResource = metav1.GroupVersionResource{Version: "v1", Resource: "bindings"}, ""
	resp = review(t, h, bindings)
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, `[P6] pod ai-team/queued may not run on node "a10-node-9": it is bound to the node`)
	binding.Object = raw(t, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "queued"}, Target: corev1.ObjectReference{Kind: "Node", Name: "a100-node-2"}})
	assert.True(t, review(t, h, binding).Allowed)
	bindings.Object = binding.Object
	assert.True(t, review(t, h, bindings).Allowed)

	forged := pod("forged", nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")})
	forged.Spec.NodeName = "a10-node-9"
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "decoy", Controller: new(true)}}
	req = podRequest(t, forged)
	req.UserInfo.Username = "mallory"
	assert.False(t, review(t, h, req).Allowed, "an ownerReference is a claim")
	req.UserInfo.Username = policy.DaemonSetControllers[0]
	assert.False(t, review(t, h, req).Allowed, "a DaemonSet pod that asks for GPUs is no node agent")
	agent := forged.DeepCopy()
	agent.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	req = podRequest(t, agent)
	req.UserInfo.Username = policy.DaemonSetControllers[0]
	resp = review(t, h, req)
	assert.False(t, resp.Allowed, "a tenant's DaemonSet: the controller creates anyone's pods")
	assert.Contains(t, resp.Result.Message, "from a namespace the operator trusts with node agents")
	req.Namespace = "kube-system"
	assert.True(t, review(t, h, req).Allowed, "the DaemonSet controller's pod without devices in kube-system is a node agent")
	req.Namespace = "gpu-operator"
	assert.False(t, review(t, h, req).Allowed, "a namespace the operator did not list")
	trusting := &PlacementHandler{Catalog: c, AgentNamespaces: policy.TrustedAgentNamespaces("litepool-system", []string{"gpu-operator"})}
	assert.True(t, review(t, trusting, req).Allowed, "a namespace the operator listed")
	req.Namespace = "litepool-system"
	assert.True(t, review(t, trusting, req).Allowed, "litepool's own namespace")
	req.Namespace = "ai-team"
	assert.False(t, review(t, trusting, req).Allowed, "a tenant's namespace, listed nowhere")

	t.Run("a binding's DaemonSet claim counts only in a trusted namespace", func(t *testing.T) {
		for ns, allowed := range map[string]bool{"ai-team": false, "gpu-operator": true} {
			claimed := agent.DeepCopy()
			claimed.Name, claimed.Namespace, claimed.Spec.NodeName = "claimed", ns, ""
			claimed.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			require.NoError(t, c.Reader.(client.Client).Create(context.Background(), claimed))
			b := admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Binding"}, Name: "claimed", Namespace: ns,
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "binding", Operation: admissionv1.Create,
				Object: raw(t, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "claimed"}, Target: corev1.ObjectReference{Kind: "Node", Name: "a10-node-9"}})}
			assert.Equal(t, allowed, review(t, trusting, b).Allowed, ns)
		}
	})

	t.Run("an update that gives a pod pinned to the node the toleration is judged", func(t *testing.T) {
		pinned := pod("pinned", nil, nil)
		pinned.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a10-node-9"}}}}}}}}
		tolerant := pinned.DeepCopy()
		tolerant.Spec.Tolerations = []corev1.Toleration{{Key: policy.LabelPool, Operator: corev1.TolerationOpExists}}
		req := podRequest(t, tolerant)
		req.Operation, req.OldObject = admissionv1.Update, raw(t, pinned)
		resp := review(t, h, req)
		assert.False(t, resp.Allowed)
		assert.Equal(t, `[P6] pod ai-team/pinned may not run on node "a10-node-9": it tolerates the pool's taint (runwhere.ai/pool Exists) and its node affinity allows the node, but the node belongs to exclusive pool "dev-sandbox", which runs only its own pods and node agents (DaemonSet pods that ask for no device, from a namespace the operator trusts with node agents), and the pod asks for no pool; label the pod runwhere.ai/pool=dev-sandbox from a namespace the pool admits, or keep it off the pool's nodes`, resp.Result.Message)
		require.NotNil(t, resp.Result.Details)
		assert.Equal(t, []metav1.StatusCause{{Type: policy.CauseRule, Message: "P6"}}, resp.Result.Details.Causes)

		ownUpdate := own.DeepCopy()
		ownUpdate.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		req = podRequest(t, ownUpdate)
		req.Namespace, req.Operation, req.OldObject = "notebooks", admissionv1.Update, raw(t, own)
		assert.True(t, review(t, h, req).Allowed, "the pool's own pod may tolerate more")

		req = podRequest(t, tolerant)
		req.Operation, req.SubResource, req.OldObject = admissionv1.Update, "status", raw(t, pinned)
		assert.True(t, review(t, h, req).Allowed, "pods/status is not placement")
	})
}

// Which resources P5 judges is each handler's own: two handlers in one process, one told
// that vendor.example/xpu is an accelerator, one not, judge the same pod differently.
func TestPodHandlersJudgeTheirOwnAccelerators(t *testing.T) {
	c := fixture(t)
	withXPU := &PodHandler{Catalog: c, Accelerators: policy.NewAccelerators("vendor.example/xpu")}
	known := &PodHandler{Catalog: c}
	training := map[string]string{policy.LabelPool: "train-a100", policy.LabelWorkloadType: "training"}
	sent := pod("xpu-job", training, corev1.ResourceList{"vendor.example/xpu": resource.MustParse("2")})

	for range 2 { // interleaved: neither handler's set leaks into the other
		resp := review(t, withXPU, podRequest(t, sent))
		require.False(t, resp.Allowed)
		assert.Equal(t, `[P5] pod requests vendor.example/xpu but pool "train-a100" provides nvidia.com/gpu: request nvidia.com/gpu or use a pool of vendor.example/xpu nodes`, resp.Result.Message)

		resp = review(t, known, podRequest(t, sent))
		assert.True(t, resp.Allowed, "vendor.example/xpu is no accelerator to a handler not told so: %v", resp.Result)
		assert.Equal(t, "train-a100", applied(t, sent, resp).Spec.NodeSelector[policy.LabelPool], "P1 still places the pod")
	}

	gpu := pod("gpu-job", training, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})
	for _, h := range []*PodHandler{withXPU, known} {
		assert.True(t, review(t, h, podRequest(t, gpu)).Allowed, "the known set is judged by both")
	}
}

// TestPodHandlerJudgesPlacement (P6 on pods that name a pool): the pod-placement entries'
// object selectors leave a pod with a pool label to the mutating call, which judges it
// as it will be stored (its pool's nodeSelector and toleration added).
func TestPodHandlerJudgesPlacement(t *testing.T) {
	c := fixture(t)
	require.NoError(t, c.Reader.(client.Client).Create(context.Background(), testNode("a10-node-9", "A10-24G", "dev-sandbox")))
	h := &PodHandler{Catalog: c}

	placed := pod("placed", map[string]string{policy.LabelPool: "train-a100"}, nil)
	placed.Spec.NodeName = "a10-node-9"
	resp := review(t, h, podRequest(t, placed))
	assert.False(t, resp.Allowed)
	assert.Equal(t, `[P6] pod ai-team/placed may not run on node "a10-node-9": it is bound to the node, but the node belongs to exclusive pool "dev-sandbox", which runs only its own pods and node agents (DaemonSet pods that ask for no device, from a namespace the operator trusts with node agents), and the pod asks for pool "train-a100"; label the pod runwhere.ai/pool=dev-sandbox from a namespace the pool admits, or keep it off the pool's nodes`, resp.Result.Message)

	t.Run("a pool's own pod bound to its node is admitted", func(t *testing.T) {
		own := pod("own", nil, nil) // its pool comes from the namespace's default
		own.Namespace, own.Spec.NodeName = "notebooks", "a10-node-9"
		assert.True(t, review(t, h, podRequest(t, own)).Allowed)
	})
	t.Run("a tolerate-all pod is pinned to its pool by P1's nodeSelector, so admitted", func(t *testing.T) {
		tolerant := pod("tolerant", map[string]string{policy.LabelPool: "train-a100"}, nil)
		tolerant.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		resp := review(t, h, podRequest(t, tolerant))
		require.True(t, resp.Allowed, resp.Result)
		assert.Equal(t, map[string]string{policy.LabelPool: "train-a100"}, applied(t, tolerant, resp).Spec.NodeSelector)
	})
	t.Run("the DaemonSet controller's device-free pod is a node agent", func(t *testing.T) {
		agent := placed.DeepCopy()
		agent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "exporter", Controller: new(true)}}
		req := podRequest(t, agent)
		req.UserInfo.Username = "mallory"
		assert.False(t, review(t, h, req).Allowed, "an ownerReference is a claim")
		req.UserInfo.Username = policy.DaemonSetControllers[0]
		assert.False(t, review(t, h, req).Allowed, "a tenant's DaemonSet is no node agent")
		trusting := &PodHandler{Catalog: c, AgentNamespaces: []string{"ai-team"}}
		assert.True(t, review(t, trusting, req).Allowed, "in a namespace the operator trusts with node agents")
	})
}

// TestPodHandlerJudgesPinnedPods (P2-P5 on pods pinned by their placement): a pod
// without the pool label (or labelled default) whose required node affinity only the
// members of pool train-a100 satisfy is judged as that pool's pod, by the nodes the
// cache holds.
func TestPodHandlerJudgesPinnedPods(t *testing.T) {
	c := fixture(t)
	cl := c.Reader.(client.Client)
	restricted := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "restricted"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, Namespaces: []string{"research"}}}
	require.NoError(t, cl.Create(context.Background(), restricted))
	require.NoError(t, cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	member := testNode("r-node-1", "", "restricted")
	member.Labels[corev1.LabelHostname] = "r-host-1"
	require.NoError(t, cl.Create(context.Background(), member))
	h := &PodHandler{Catalog: c}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	in := func(key string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	for name, a := range map[string]*corev1.Affinity{
		"pool In":     affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in(policy.LabelPool, "restricted")}}),
		"matchFields": affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{in("metadata.name", "r-node-1")}}),
		"hostname":    affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in(corev1.LabelHostname, "r-host-1")}}),
	} {
		t.Run(name, func(t *testing.T) {
			p := pod("pinned", nil, nil)
			p.Spec.Affinity = a
			resp := review(t, h, podRequest(t, p))
			require.False(t, resp.Allowed)
			assert.Contains(t, resp.Result.Message, `[P4] the pod's required node affinity pins it to pool "restricted" (only the pool's members satisfy it), so it is judged as the pool's pod: namespace "ai-team" may not use pool "restricted"`)

			p.Labels = map[string]string{policy.LabelPool: policy.DefaultPool}
			resp = review(t, h, podRequest(t, p))
			require.False(t, resp.Allowed, "labelled default")
			assert.Contains(t, resp.Result.Message, `[P4] the pod's required node affinity pins it to pool "restricted"`)

			p.Labels = nil
			p.Namespace = "research"
			req := podRequest(t, p)
			req.Namespace = "research"
			resp = review(t, h, req)
			require.True(t, resp.Allowed, "from a namespace the pool admits: %v", resp.Result)
			assert.Equal(t, "restricted", applied(t, p, resp).Labels[policy.LabelPool], "P1 labels it as the pool's pod")
		})
	}
	other := pod("elsewhere", nil, nil)
	other.Spec.Affinity = affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{in("metadata.name", "r-node-1")}},
		corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{in("metadata.name", "a10-node-3")}})
	assert.True(t, review(t, h, podRequest(t, other)).Allowed, "a node of no pool satisfies it too: no pool's pod")
}

// TestPoolHandlerDomainOutPercent: spec.health.domainOutPercent needs spec.topology (R1,
// the field named), on create and on an update that adds it or takes the topology away.
func TestPoolHandlerDomainOutPercent(t *testing.T) {
	h := &PoolHandler{Catalog: catalogOf(t, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}})}
	pool := func(top *v1alpha1.TopologySpec, percent int32) *v1alpha1.Pool {
		return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}, Topology: top, Health: &v1alpha1.HealthPolicy{DomainOutPercent: percent}}}
	}
	racks := &v1alpha1.TopologySpec{Levels: []string{"rack"}}
	want := `[R1] spec.health.domainOutPercent 50 needs domains, and pool "train-a100" has no spec.topology: declare spec.topology (a preset or levels), or leave spec.health.domainOutPercent out`
	resp := review(t, h, poolRequest(t, admissionv1.Create, pool(nil, 50), nil))
	assert.False(t, resp.Allowed)
	assert.Equal(t, want, resp.Result.Message)
	resp = review(t, h, poolRequest(t, admissionv1.Update, pool(nil, 50), pool(racks, 50)))
	assert.False(t, resp.Allowed, "taking the topology away from under the rule")
	assert.Equal(t, want, resp.Result.Message)
	assert.True(t, review(t, h, poolRequest(t, admissionv1.Create, pool(racks, 50), nil)).Allowed)
	assert.True(t, review(t, h, poolRequest(t, admissionv1.Update, pool(nil, 0), pool(racks, 50))).Allowed)
}
