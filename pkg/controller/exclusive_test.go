package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func exclusiveFixture(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func labelledNode(name, pool string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: pool}}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestExclusiveTaintReconciler(t *testing.T) {
	ctx := context.Background()
	excl := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "excl"}, Spec: v1alpha1.PoolSpec{Exclusive: true}}
	c := exclusiveFixture(t, excl, labelledNode("joined-by-label", "excl"), labelledNode("left", "", policy.ExclusiveTaint("excl")))
	r := &ExclusiveTaintReconciler{Client: c}
	taints := func(name string) []corev1.Taint {
		var n corev1.Node
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, &n))
		return n.Spec.Taints
	}
	for _, n := range []string{"joined-by-label", "left", "gone"} {
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
		require.NoError(t, err)
	}
	assert.Equal(t, []corev1.Taint{policy.ExclusiveTaint("excl")}, taints("joined-by-label"))
	assert.Empty(t, taints("left"))

	excl.Spec.Exclusive = false
	require.NoError(t, c.Update(ctx, excl))
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "joined-by-label"}})
	require.NoError(t, err)
	assert.Empty(t, taints("joined-by-label"), "the pool stopped being exclusive")
	assert.Len(t, r.members(ctx, excl), 1)
}

func TestBindingTargetsReconciler(t *testing.T) {
	ctx := context.Background()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: WebhookConfiguration},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "nodes.runwhere.ai"}, {Name: PlacementBindingsWebhook, ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("ca")},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "not-the-scheduler", Expression: "x"}, {Name: BindingTargetsCondition, Expression: NotTheScheduler}}}}}
	c := exclusiveFixture(t, cfg,
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "excl"}, Spec: v1alpha1.PoolSpec{Exclusive: true}},
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "open"}},
		labelledNode("b-node", "excl"), labelledNode("a-node", "excl"), labelledNode("c-node", "open"), labelledNode("d-node", "labels-only"))
	r := &BindingTargetsReconciler{Client: c}
	_, err := r.Reconcile(ctx, bindingTargetsKey)
	require.NoError(t, err)
	var got admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &got))
	assert.Equal(t, "!(request.resource.resource == 'bindings' || (has(request.subResource) && request.subResource == 'binding')) || request.userInfo.username != 'system:kube-scheduler' && (object.target.name in ['a-node', 'b-node'])", got.Webhooks[1].MatchConditions[1].Expression)
	assert.Equal(t, "x", got.Webhooks[1].MatchConditions[0].Expression, "only its own conditions are written")
	assert.Equal(t, []byte("ca"), got.Webhooks[1].ClientConfig.CABundle, "the CA bundle is left alone")
}

func TestBindingTargetsConditions(t *testing.T) {
	assert.Equal(t, []admissionregistrationv1.MatchCondition{{Name: BindingTargetsCondition,
		Expression: "!(request.resource.resource == 'bindings' || (has(request.subResource) && request.subResource == 'binding'))"}}, BindingTargetsConditions(nil), "no exclusive node: no binding is sent")
	assert.Equal(t, "^(?:(?:a(?:b)?|b|x\\.ab))$", namesRegexp([]string{"a", "ab", "b", "x.ab"}), "a name that is another's prefix; a literal '.'")
	assert.Equal(t, "^(?:gpu-node-0(?:0[1-9]|1[0-2]))$", namesRegexp([]string{"gpu-node-001", "gpu-node-002", "gpu-node-003", "gpu-node-004", "gpu-node-005", "gpu-node-006", "gpu-node-007", "gpu-node-008", "gpu-node-009", "gpu-node-010", "gpu-node-011", "gpu-node-012"}))
	for _, n := range []string{BindingTargetsCondition, BindingTargetsCondition + "-2", BindingTargetsCondition + "-12"} {
		assert.True(t, IsBindingTargetsCondition(n), n)
	}
	for _, n := range []string{"not-the-scheduler", BindingTargetsCondition + "-", BindingTargetsCondition + "-x", BindingTargetsCondition + "s"} {
		assert.False(t, IsBindingTargetsCondition(n), n)
	}
}
