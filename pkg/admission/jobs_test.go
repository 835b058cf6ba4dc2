package admission

import (
	"encoding/json"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// jobFixture: an exclusive training pool that admits only namespace ai-team (and
// "defaulted", whose default pool it is), an open training pool of NPUs with HCCL
// retry, and namespace "other", which the exclusive pool does not admit.
func jobFixture(t *testing.T) Catalog {
	return catalogOf(t,
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-excl"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1,
			Exclusive: true, Namespaces: []string{"ai-team", "defaulted"}}},
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-open"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1,
			Accelerator: v1alpha1.AcceleratorSpec{ResourceName: "huawei.com/Ascend910"},
			HCCL:        v1alpha1.HCCLSpec{OpRetry: v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ai-team"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "defaulted", Labels: map[string]string{policy.LabelPool: "train-excl"}}},
	)
}

func queuedJob(namespace string, templateLabels map[string]string) *batchv1.Job {
	npu := corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8")}
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: namespace, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "q"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: templateLabels},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "train:1", Resources: corev1.ResourceRequirements{Limits: npu}}}}}}}
}

func jobRequest(t *testing.T, op admissionv1.Operation, job *batchv1.Job) admissionv1.AdmissionRequest {
	return admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
		Resource: metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, Namespace: job.Namespace,
		Operation: op, Object: raw(t, job)}
}

// appliedJob applies the answer's JSON patch to the Job as it was sent (doc).
func appliedJob(t *testing.T, doc []byte, resp *admissionv1.AdmissionResponse) *batchv1.Job {
	t.Helper()
	if len(resp.Patch) > 0 {
		p, err := jsonpatchapply.DecodePatch(resp.Patch)
		require.NoError(t, err)
		doc, err = p.Apply(doc)
		require.NoError(t, err)
	}
	out := &batchv1.Job{}
	require.NoError(t, json.Unmarshal(doc, out))
	return out
}

func TestJobHandlerGivesTheTemplateItsPoolsPlacement(t *testing.T) {
	h := &JobHandler{Catalog: jobFixture(t)}
	tol := policy.ExclusivePoolToleration("train-excl")

	t.Run("a template naming an exclusive pool gets its nodeSelector and toleration", func(t *testing.T) {
		job := queuedJob("ai-team", map[string]string{policy.LabelPool: "train-excl"})
		req := jobRequest(t, admissionv1.Create, job)
		resp := review(t, h, req)
		require.True(t, resp.Allowed)
		got := appliedJob(t, req.Object.Raw, resp).Spec.Template
		assert.Equal(t, map[string]string{policy.LabelPool: "train-excl"}, got.Spec.NodeSelector)
		assert.Equal(t, []corev1.Toleration{tol}, got.Spec.Tolerations)
		assert.Empty(t, got.Spec.Containers[0].Env, "no HCCL environment in a template")
		assert.Empty(t, resp.Warnings)
	})

	t.Run("a namespace's default pool labels the template too", func(t *testing.T) {
		job := queuedJob("defaulted", nil)
		req := jobRequest(t, admissionv1.Create, job)
		resp := review(t, h, req)
		require.True(t, resp.Allowed)
		got := appliedJob(t, req.Object.Raw, resp).Spec.Template
		assert.Equal(t, map[string]string{policy.LabelPool: "train-excl"}, got.Labels)
		assert.Equal(t, map[string]string{policy.LabelPool: "train-excl"}, got.Spec.NodeSelector)
		assert.Equal(t, []corev1.Toleration{tol}, got.Spec.Tolerations)
	})

	t.Run("a template sent without metadata takes the label as a whole metadata object", func(t *testing.T) {
		doc := []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"bare","namespace":"defaulted"},` +
			`"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"train:1"}]}}}}`)
		req := admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
			Namespace: "defaulted", Operation: admissionv1.Create}
		req.Object.Raw = doc
		resp := review(t, h, req)
		require.True(t, resp.Allowed)
		got := appliedJob(t, doc, resp).Spec.Template
		assert.Equal(t, map[string]string{policy.LabelPool: "train-excl"}, got.Labels)
		assert.Equal(t, []corev1.Toleration{tol}, got.Spec.Tolerations)
	})

	t.Run("a non-exclusive pool: the nodeSelector, as its pods get, and no toleration", func(t *testing.T) {
		job := queuedJob("ai-team", map[string]string{policy.LabelPool: "train-open"})
		req := jobRequest(t, admissionv1.Create, job)
		resp := review(t, h, req)
		require.True(t, resp.Allowed)
		got := appliedJob(t, req.Object.Raw, resp).Spec.Template
		assert.Equal(t, map[string]string{policy.LabelPool: "train-open"}, got.Spec.NodeSelector)
		assert.Empty(t, got.Spec.Tolerations)
		assert.Empty(t, got.Spec.Containers[0].Env, "the HCCL environment is left to the pods")
	})

	t.Run("a template that already has the placement is unchanged", func(t *testing.T) {
		job := queuedJob("ai-team", map[string]string{policy.LabelPool: "train-excl"})
		job.Spec.Template.Spec.NodeSelector = map[string]string{policy.LabelPool: "train-excl"}
		job.Spec.Template.Spec.Tolerations = []corev1.Toleration{tol}
		resp := review(t, h, jobRequest(t, admissionv1.Create, job))
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patch)
	})

	t.Run("a Job naming no pool is left alone", func(t *testing.T) {
		resp := review(t, h, jobRequest(t, admissionv1.Create, queuedJob("ai-team", map[string]string{"app": "x"})))
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patch)
		assert.Empty(t, resp.Warnings)
	})

	t.Run("updates are left alone", func(t *testing.T) {
		resp := review(t, h, jobRequest(t, admissionv1.Update, queuedJob("ai-team", map[string]string{policy.LabelPool: "train-excl"})))
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patch)
	})

	for _, tc := range []struct {
		name, namespace, pool, rule string
	}{
		{"a pool that does not exist", "ai-team", "nosuch", "[P2]"},
		{"a pool the namespace may not use", "other", "train-excl", "[P4]"},
	} {
		t.Run(tc.name+": no patch, the pods' refusal as a warning", func(t *testing.T) {
			resp := review(t, h, jobRequest(t, admissionv1.Create, queuedJob(tc.namespace, map[string]string{policy.LabelPool: tc.pool})))
			assert.True(t, resp.Allowed, "the Job is admitted: its pods meet the pod rules")
			assert.Empty(t, resp.Patch, "no toleration, no nodeSelector")
			require.Len(t, resp.Warnings, 1)
			assert.Contains(t, resp.Warnings[0], "litepool left the Job's pod template unchanged: its pods will be refused at creation: "+tc.rule)
		})
	}
}
