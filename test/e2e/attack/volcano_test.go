package attack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Issue 42's rows: a pool feeding Volcano. Volcano's CRDs (make volcano-crds) are
// installed here, when the rows play; no Volcano scheduler runs.
var (
	volcanoQueues    = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	volcanoPodGroups = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	volcanoJobs      = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}
)

const (
	volcanoTenant  = "volcano-tenant" // create Volcano Jobs and PodGroups
	queueCreator   = "queue-creator"  // create Volcano Queues
	volcanoPoolAdm = "at-volcano"     // a pool feeding Volcano that admits at-own only
)

func installVolcano(t *testing.T) {
	t.Helper()
	require.NoError(t, framework.InstallVolcanoCRDs(ctx, framework.C))
}

func dynAs(t *testing.T, user string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(asConfig(user))
	require.NoError(t, err)
	return d
}

func attackVolcanoQueueFromOtherNamespace(t *testing.T) {
	installVolcano(t)
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: volcanoPoolAdm},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Namespaces: []string{ownNS},
			Queue: &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueVolcano}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	grant(t, volcanoTenant, rbacv1.PolicyRule{APIGroups: []string{"batch.volcano.sh"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get"}},
		rbacv1.PolicyRule{APIGroups: []string{"scheduling.volcano.sh"}, Resources: []string{"podgroups"}, Verbs: []string{"create", "get"}})
	d := dynAs(t, volcanoTenant)
	job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
		"metadata": map[string]any{"name": "sneak", "namespace": foreignNS},
		"spec": map[string]any{"queue": volcanoPoolAdm, "minAvailable": int64(1), "tasks": []any{map[string]any{"name": "w", "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.example.com/x:1"}}}}}}}}}
	pg := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "sneak", "namespace": foreignNS},
		"spec":     map[string]any{"queue": volcanoPoolAdm, "minMember": int64(1)}}}
	for gvr, obj := range map[schema.GroupVersionResource]*unstructured.Unstructured{volcanoJobs: job, volcanoPodGroups: pg} {
		_, err := d.Resource(gvr).Namespace(foreignNS).Create(ctx, obj, metav1.CreateOptions{})
		require.Error(t, err, "%s from a namespace the pool does not admit", obj.GetKind())
		assert.Contains(t, err.Error(), `admission webhook "volcano-queues.runwhere.ai" denied the request: [P4] `+obj.GetKind()+` in namespace "at-foreign" names Volcano queue "at-volcano"`)
		_, err = framework.C.Dynamic.Resource(gvr).Namespace(foreignNS).Get(ctx, "sneak", metav1.GetOptions{})
		assert.Error(t, err, "the refused %s was made", obj.GetKind())
	}
}

func attackVolcanoQueueNameTaken(t *testing.T) {
	installVolcano(t)
	grant(t, queueCreator, rbacv1.PolicyRule{APIGroups: []string{"scheduling.volcano.sh"}, Resources: []string{"queues"}, Verbs: []string{"create"}})
	const name = "at-vqueue"
	q := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
		"metadata": map[string]any{"name": name, "labels": map[string]any{policy.LabelPool: name}},
		"spec":     map[string]any{"weight": int64(1), "capability": map[string]any{"nvidia.com/gpu": "1000"}}}}
	_, err := dynAs(t, queueCreator).Resource(volcanoQueues).Create(ctx, q, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Queue: &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueVolcano}}}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[R1] metadata.name: a Volcano Queue named "at-vqueue" exists and is not pool "at-vqueue"'s`)
	got, err := framework.C.Dynamic.Resource(volcanoQueues).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	c, _, _ := unstructured.NestedString(got.Object, "spec", "capability", "nvidia.com/gpu")
	assert.Equal(t, "1000", c, "the Queue is left as it was")
}
