package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// nodeNameShapes are the shapes of node names the binding condition is judged on.
var nodeNameShapes = map[string]func(r *rand.Rand, i int) string{
	"numbered": func(_ *rand.Rand, i int) string { return fmt.Sprintf("gpu-node-%05d", i+1) },
	"ec2": func(r *rand.Rand, _ int) string {
		return fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", r.IntN(4), r.IntN(256), 1+r.IntN(254))
	},
	"random12": func(r *rand.Rand, _ int) string {
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, 12)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	},
}

func syntheticNodes(shape string, n int) []string {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	set := map[string]bool{}
	for i := 0; len(set) < n; i++ {
		set[nodeNameShapes[shape](r, i)] = true
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range set {
			if !yield(k) {
				return
			}
		}
	})
}

// apiServerCondition compiles expr the way the API server compiles a webhook's match
// conditions (accessors.go: the same compiler, environment and runtime cost budget).
func apiServerCondition(t testing.TB, expr string) func(resource, subResource string, obj *corev1.Binding) bool {
	compiler := celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	fail := admissionregistrationv1.Fail
	m := matchconditions.NewMatcher(compiler.CompileCondition([]celplugin.ExpressionAccessor{&matchconditions.MatchCondition{Name: BindingTargetsCondition, Expression: expr}},
		celplugin.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions), &fail, "webhook", "validating", PlacementWebhook)
	return func(resource, subResource string, obj *corev1.Binding) bool {
		gvk := schema.GroupVersionKind{Version: "v1", Kind: "Binding"}
		obj.SetGroupVersionKind(gvk)
		attr := admission.NewAttributesRecord(obj, nil, gvk, "team", obj.Name, schema.GroupVersionResource{Version: "v1", Resource: resource}, subResource,
			admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "second-scheduler"})
		va, err := admission.NewVersionedAttributes(attr, gvk, nil)
		require.NoError(t, err)
		res := m.Match(context.Background(), va, nil, nil)
		require.NoError(t, res.Error, "the API server evaluates the condition")
		return res.Matches
	}
}

// nearMisses are names close to n: prefixes, suffixes, one character changed, a '.'
// read as any character.
func nearMisses(r *rand.Rand, n string) []string {
	out := []string{n[:len(n)-1], n[1:], n + "0", n + "-", n + ".", "a" + n, "0" + n, n + n[len(n)-1:]}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-."
	for range 3 {
		i := r.IntN(len(n))
		b := []byte(n)
		b[i] = alphabet[r.IntN(len(alphabet))]
		out = append(out, string(b))
	}
	if i := strings.IndexByte(n, '.'); i >= 0 {
		out = append(out, n[:i]+"x"+n[i+1:], n[:i]+"-"+n[i+1:])
	}
	return out
}

func TestBindingTargetsExpressionAtScale(t *testing.T) {
	for _, shape := range []string{"numbered", "ec2", "random12"} {
		for _, n := range []int{2000, 5000, 10000} {
			t.Run(fmt.Sprintf("%s-%d", shape, n), func(t *testing.T) {
				nodes := syntheticNodes(shape, n)
				expr := BindingTargetsExpression(nodes)
				t.Logf("%d %s names: expression of %d characters, regexp: %v", n, shape, len(expr), strings.Contains(expr, ".matches("))
				require.LessOrEqual(t, len(expr), MaxBindingTargetsExpression)
				if shape == "random12" && n == 10000 {
					// 10,000 random names leave nothing to share: 110,000 characters.
					assert.Equal(t, "true", expr, "past the limit every binding is sent")
					return
				}
				require.NotEqual(t, "true", expr, "the scope stays the exclusive nodes")
				match := apiServerCondition(t, expr)
				bind := func(node string) bool {
					return match("pods", "binding", &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}})
				}
				listed := map[string]bool{}
				for _, node := range nodes {
					listed[node] = true
					require.True(t, bind(node), "a binding onto listed node %s is sent", node)
				}
				assert.True(t, match("bindings", "", &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: nodes[0]}}),
					"the bindings resource is judged too")
				assert.False(t, match("bindings", "", &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: "elsewhere"}}))
				r := rand.New(rand.NewPCG(1, 2))
				for _, node := range nodes[:min(len(nodes), 1500)] {
					for _, miss := range nearMisses(r, node) {
						require.Equal(t, listed[miss], bind(miss), "a binding onto %q (near %q) is sent exactly when it is listed", miss, node)
					}
				}
			})
		}
	}
}

// BenchmarkBindingTargetsCondition is the API server's cost of the condition for one
// binding onto an unlisted node (a near miss of a listed name), by the match-condition
// compiler the API server uses: the largest list the limit admits against the regular
// expressions of 10,000 names.
func BenchmarkBindingTargetsCondition(b *testing.B) {
	ec2 := syntheticNodes("ec2", 10000)
	cases := []struct {
		name   string
		nodes  []string
		target string
	}{
		{"none", nil, "gpu-node-99999"},
		{"list-5000-random12", syntheticNodes("random12", 5000), "zzzzzzzzzzzz"},
		{"regexp-10000-numbered", syntheticNodes("numbered", 10000), "gpu-node-10001"},
		{"regexp-10000-ec2", ec2, ec2[len(ec2)/2][:len(ec2[len(ec2)/2])-1] + "x"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			expr := BindingTargetsExpression(c.nodes)
			if expr == "true" {
				b.Fatalf("%s: true", c.name)
			}
			match := apiServerCondition(b, expr)
			obj := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: c.target}}
			for b.Loop() {
				if match("pods", "binding", obj) {
					b.Fatalf("%s: %s is sent", c.name, c.target)
				}
			}
			b.ReportMetric(float64(len(expr)), "chars")
		})
	}
}

// TestBindingTargetsReconcilerWritesTheRegexp: the controller's JSON patch carries the
// regular expression's backslashes intact, and what it writes is what the API server
// matches the exclusive nodes with.
func TestBindingTargetsReconcilerWritesTheRegexp(t *testing.T) {
	ctx := context.Background()
	names := syntheticNodes("ec2", 4000)
	objs := []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: WebhookConfiguration},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: PlacementWebhook,
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: BindingTargetsCondition, Expression: "true"}}}}},
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "excl"}, Spec: v1alpha1.PoolSpec{Exclusive: true}},
	}
	for _, n := range names {
		objs = append(objs, labelledNode(n, "excl"))
	}
	c := exclusiveFixture(t, objs...)
	_, err := (&BindingTargetsReconciler{Client: c}).Reconcile(ctx, bindingTargetsKey)
	require.NoError(t, err)
	var got admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &got))
	expr := got.Webhooks[0].MatchConditions[0].Expression
	assert.Equal(t, BindingTargetsExpression(names), expr)
	assert.Contains(t, expr, `.matches(r'^(?:ip-10-`, "4,000 such names are too long as a list")
	assert.True(t, strings.HasSuffix(expr, `)\.ec2\.internal$')`), "the common suffix once, its dots escaped")
	match := apiServerCondition(t, expr)
	for _, n := range []string{names[0], names[len(names)-1]} {
		assert.True(t, match("pods", "binding", &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: n}}), n)
	}
	assert.False(t, match("pods", "binding", &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: strings.Replace(names[0], ".", "x", 1)}}))
}
