package controller

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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

// apiServerCondition compiles conds the way the API server compiles a webhook's match
// conditions (accessors.go: the same compiler, environment and runtime cost budget, one
// budget for all of them) as the entry's only ones, as deploy/webhook has it, and tells
// whether a binding by user is sent.
func apiServerCondition(t testing.TB, conds []admissionregistrationv1.MatchCondition) func(resource, subResource, user string, obj *corev1.Binding) bool {
	compiler := celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	fail := admissionregistrationv1.Fail
	var acc []celplugin.ExpressionAccessor
	for _, c := range conds {
		acc = append(acc, &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression})
	}
	m := matchconditions.NewMatcher(compiler.CompileCondition(acc, celplugin.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions),
		&fail, "webhook", "validating", PlacementBindingsWebhook)
	return func(resource, subResource, username string, obj *corev1.Binding) bool {
		gvk := schema.GroupVersionKind{Version: "v1", Kind: "Binding"}
		obj.SetGroupVersionKind(gvk)
		attr := admission.NewAttributesRecord(obj, nil, gvk, "team", obj.Name, schema.GroupVersionResource{Version: "v1", Resource: resource}, subResource,
			admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: username})
		va, err := admission.NewVersionedAttributes(attr, gvk, nil)
		require.NoError(t, err)
		res := m.Match(context.Background(), va, nil, nil)
		require.NoError(t, res.Error, "the API server evaluates the conditions")
		return res.Matches
	}
}

const secondScheduler = "second-scheduler"

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
		for _, n := range []int{2000, 10000, 40000} {
			t.Run(fmt.Sprintf("%s-%d", shape, n), func(t *testing.T) {
				nodes := syntheticNodes(shape, n)
				conds := BindingTargetsConditions(nodes)
				size := 0
				for _, c := range conds {
					require.LessOrEqual(t, len(c.Expression), MaxBindingTargetsExpression)
					size += len(c.Expression)
				}
				t.Logf("%d %s names: %d conditions of %d characters, regexp: %v", n, shape, len(conds), size, strings.Contains(conds[0].Expression, ".matches("))
				require.NotEqual(t, NotTheScheduler, conds[0].Expression, "the scope stays the exclusive nodes")
				match := apiServerCondition(t, conds)
				bind := func(node string) bool {
					return match("pods", "binding", secondScheduler, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}})
				}
				listed := map[string]bool{}
				for _, node := range nodes {
					listed[node] = true
				}
				// Every listed name up to 10,000; past that 4,000 spread over every
				// slice (and each name's neighbours below), which is where a slice's
				// bounds would drop one: each name costs the compiled condition a
				// lookup, and 40,000 of them a minute of make test.
				step := 1
				if len(nodes) > 10000 {
					step = len(nodes) / 4000
				}
				for i := 0; i < len(nodes); i += step {
					require.True(t, bind(nodes[i]), "a binding onto listed node %s is sent", nodes[i])
					if i > 0 {
						require.True(t, bind(nodes[i-1]), "a binding onto listed node %s is sent", nodes[i-1])
					}
				}
				require.True(t, bind(nodes[len(nodes)-1]), "a binding onto the last listed node is sent")
				assert.True(t, match("bindings", "", secondScheduler, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: nodes[0]}}),
					"the bindings resource is judged too")
				assert.False(t, match("bindings", "", secondScheduler, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: "elsewhere"}}))
				assert.False(t, match("pods", "binding", "system:kube-scheduler", &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: nodes[0]}}),
					"the scheduler's bindings are never sent")
				// Near misses of 500 names spread over every slice, and of each
				// slice's first and last name (its bounds).
				r := rand.New(rand.NewPCG(1, 2))
				sample := []string{nodes[0], nodes[len(nodes)-1]}
				for i := 0; i < len(nodes); i += max(1, len(nodes)/500) {
					sample = append(sample, nodes[i])
					if i > 0 {
						sample = append(sample, nodes[i-1])
					}
				}
				for _, node := range sample {
					for _, miss := range append(nearMisses(r, node), "0", "zzzzzzzzzzzzzz", "~") {
						require.Equal(t, listed[miss], bind(miss), "a binding onto %q (near %q) is sent exactly when it is listed", miss, node)
					}
				}
			})
		}
	}
	t.Run("past the limit", func(t *testing.T) {
		many := syntheticNodes("random12", 80000)
		assert.Equal(t, []admissionregistrationv1.MatchCondition{{Name: BindingTargetsCondition, Expression: NotTheScheduler}}, BindingTargetsConditions(many),
			"past MaxBindingTargetsConditions slices every binding but the scheduler's is sent, as deployed")
	})
}

// BenchmarkBindingTargetsCondition is the API server's cost of the condition for one
// binding onto an unlisted node (a near miss of a listed name), by the match-condition
// compiler the API server uses, for the conditions BindingTargetsConditions writes for
// names of each shape.
func BenchmarkBindingTargetsCondition(b *testing.B) {
	ec2 := syntheticNodes("ec2", 10000)
	random := syntheticNodes("random12", 40000)
	random10k := syntheticNodes("random12", 10000)
	cases := []struct {
		name   string
		nodes  []string
		user   string
		target string
	}{
		{"none", nil, secondScheduler, "gpu-node-99999"},
		{"5000-random12", syntheticNodes("random12", 5000), secondScheduler, "zzzzzzzzzzzz"},
		{"10000-numbered", syntheticNodes("numbered", 10000), secondScheduler, "gpu-node-10001"},
		{"10000-ec2", ec2, secondScheduler, ec2[len(ec2)/2][:len(ec2[len(ec2)/2])-1] + "x"},
		{"10000-random12", random10k, secondScheduler, random10k[len(random10k)/2][:11] + "~"},
		{"40000-random12", random, secondScheduler, random[len(random)/2][:11] + "~"},
		{"40000-random12-scheduler", random, "system:kube-scheduler", random[len(random)/2]},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			conds := BindingTargetsConditions(c.nodes)
			if conds[0].Expression == NotTheScheduler {
				b.Fatalf("%s: every binding sent", c.name)
			}
			match := apiServerCondition(b, conds)
			obj := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: c.target}}
			for b.Loop() {
				if match("pods", "binding", c.user, obj) {
					b.Fatalf("%s: %s is sent", c.name, c.target)
				}
			}
			size := 0
			for _, c := range conds {
				size += len(c.Expression)
			}
			b.ReportMetric(float64(size), "chars")
			b.ReportMetric(float64(len(conds)), "conditions")
		})
	}
}

// BenchmarkConditionShapes is what conditionCost rests on: the API server's cost per
// binding of k conditions that hold one name each, of one list of n names (a hash
// lookup once compiled: n does not count) and of one regular expression of the same n
// random names (its length counts). Each is reported in µs of this thread's CPU time
// per binding, which a loaded machine spreads far less than wall time.
func BenchmarkConditionShapes(b *testing.B) {
	nodes := syntheticNodes("random12", 5000)
	target := nodes[2500] + "x"
	one := sendsOnly
	cases := map[string][]string{}
	for _, k := range []int{1, 2, 4, 8} {
		var exprs []string
		for i := range k {
			exprs = append(exprs, one(fmt.Sprintf("object.target.name == 'x%d'", i)))
		}
		cases[fmt.Sprintf("conditions-%d", k)] = exprs
	}
	for _, n := range []int{10, 1000, 5000} {
		cases[fmt.Sprintf("list-%d", n)] = []string{one(list(nodes[:n]))}
		cases[fmt.Sprintf("regexp-%d", n)] = []string{one("object.target.name.matches(r'" + namesRegexp(nodes[:n]) + "')")}
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		b.Run(name, func(b *testing.B) {
			match := apiServerCondition(b, bindingConditions(cases[name]))
			obj := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: target}}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			before := threadCPU(b)
			for b.Loop() {
				if match("pods", "binding", secondScheduler, obj) {
					b.Fatalf("%s: %s is sent", name, target)
				}
			}
			b.ReportMetric(float64(threadCPU(b)-before)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_THREAD, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBindingTargetsReconcilerWritesTheRegexp: the controller's JSON patch carries the
// regular expression's backslashes intact, and what it writes is what the API server
// matches the exclusive nodes with.
func TestBindingTargetsReconcilerWritesTheRegexp(t *testing.T) {
	ctx := context.Background()
	var names []string
	for i := range 4000 {
		names = append(names, fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250+1))
	}
	slices.Sort(names)
	c := exclusiveFixture(t, reconcilerFixture(names)...)
	_, err := (&BindingTargetsReconciler{Client: c}).Reconcile(ctx, bindingTargetsKey)
	require.NoError(t, err)
	var got admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &got))
	conds := got.Webhooks[0].MatchConditions
	require.Len(t, conds, 1)
	assert.Equal(t, BindingTargetsConditions(names), conds)
	expr := conds[0].Expression
	assert.Contains(t, expr, `.matches(r'^(?:ip-10-0-`, "4,000 such names take two lists, and one short regular expression")
	assert.True(t, strings.HasSuffix(expr, `)\.ec2\.internal$'))`), "the common suffix once, its dots escaped")
	match := apiServerCondition(t, conds)
	for _, n := range []string{names[0], names[len(names)-1]} {
		assert.True(t, match("pods", "binding", secondScheduler, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: n}}), n)
	}
	assert.False(t, match("pods", "binding", secondScheduler, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: strings.Replace(names[0], ".", "x", 1)}}))
}

// TestListsBeatRegexpSlices holds the premise of BindingTargetsConditions' shortcut:
// once the names need regular expressions in two conditions or more (the first filled
// to within 1/64 of the limit), any plan of lists within the limit costs less.
func TestListsBeatRegexpSlices(t *testing.T) {
	room := MaxBindingTargetsExpression - sliceOverhead
	assert.Less(t, MaxBindingTargetsConditions*conditionCost, 2*conditionCost+room*63/64)
	random := syntheticNodes("random12", 10000)
	conds := BindingTargetsConditions(random)
	assert.Len(t, conds, 2, "10,000 random names: two lists")
	assert.NotContains(t, conds[0].Expression+conds[1].Expression, ".matches(")
}

// TestBindingTargetsReconcilerWritesSlices: 16,000 random names take three conditions;
// when their pool stops being exclusive, the controller goes back to one.
func TestBindingTargetsReconcilerWritesSlices(t *testing.T) {
	ctx := context.Background()
	names := syntheticNodes("random12", 16000)
	c := exclusiveFixture(t, reconcilerFixture(names)...)
	r := &BindingTargetsReconciler{Client: c}
	_, err := r.Reconcile(ctx, bindingTargetsKey)
	require.NoError(t, err)
	var got admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &got))
	conds := got.Webhooks[0].MatchConditions
	require.Len(t, conds, 3, "three slices")
	assert.Equal(t, []string{BindingTargetsCondition, BindingTargetsCondition + "-2", BindingTargetsCondition + "-3"},
		[]string{conds[0].Name, conds[1].Name, conds[2].Name})
	match := apiServerCondition(t, conds)
	for _, n := range []string{names[0], names[8000], names[len(names)-1]} {
		assert.True(t, match("pods", "binding", secondScheduler, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: n}}), n)
	}
	var pool v1alpha1.Pool
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "excl"}, &pool))
	pool.Spec.Exclusive = false
	require.NoError(t, c.Update(ctx, &pool))
	_, err = r.Reconcile(ctx, bindingTargetsKey)
	require.NoError(t, err)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &got))
	assert.Equal(t, BindingTargetsConditions(nil), got.Webhooks[0].MatchConditions)
}

// reconcilerFixture is deploy/webhook's bindings entry (its one condition as deployed),
// an exclusive pool, and names as its nodes.
func reconcilerFixture(names []string) []client.Object {
	objs := []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: WebhookConfiguration},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: PlacementBindingsWebhook,
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: BindingTargetsCondition, Expression: NotTheScheduler}}}}},
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "excl"}, Spec: v1alpha1.PoolSpec{Exclusive: true}},
	}
	for _, n := range names {
		objs = append(objs, labelledNode(n, "excl"))
	}
	return objs
}
