package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// placementRequest is one kind of request P6's configuration sees, as the API server
// hands it to the match conditions.
type placementRequest struct {
	name string
	attr admission.Attributes
	// sent is whether P6's configuration sends it to the webhook.
	sent bool
}

// placementRequests are the requests every cluster makes most: an ordinary pod's
// create and update, and the scheduler's binding; and those P6 is for.
func placementRequests() []placementRequest {
	pod := defaultedPod()
	relabelled := pod.DeepCopy()
	relabelled.Labels["app"] = "trainer"
	tolerating := pod.DeepCopy()
	tolerating.Spec.Tolerations = append(tolerating.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	unlabelled := pod.DeepCopy()
	delete(unlabelled.Labels, "runwhere.ai/pool")
	unlabelledTolerating := tolerating.DeepCopy()
	delete(unlabelledTolerating.Labels, "runwhere.ai/pool")
	defaultTolerating := tolerating.DeepCopy()
	defaultTolerating.Labels["runwhere.ai/pool"] = "default"
	handPlaced := unlabelled.DeepCopy()
	handPlaced.Spec.NodeName = "gpu-node-00001"
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target: corev1.ObjectReference{Kind: "Node", Name: "gpu-node-00001"}}
	admin := &user.DefaultInfo{Name: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}
	replicaSets := &user.DefaultInfo{Name: "system:serviceaccount:kube-system:replicaset-controller", Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	scheduler := &user.DefaultInfo{Name: "system:kube-scheduler", Groups: []string{"system:authenticated"}}
	second := &user.DefaultInfo{Name: "system:serviceaccount:kube-system:volcano-scheduler", Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	podGVK := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, p := range []*corev1.Pod{pod, relabelled, tolerating, unlabelled, unlabelledTolerating, defaultTolerating, handPlaced} {
		p.SetGroupVersionKind(podGVK)
	}
	binding.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Binding"})
	podAttr := func(obj, old runtime.Object, op admission.Operation, u user.Info) admission.Attributes {
		return admission.NewAttributesRecord(obj, old, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, pod.Namespace, pod.Name,
			schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "", op, &metav1.CreateOptions{}, false, u)
	}
	bindAttr := func(u user.Info) admission.Attributes {
		return admission.NewAttributesRecord(binding, nil, schema.GroupVersionKind{Version: "v1", Kind: "Binding"}, pod.Namespace, pod.Name,
			schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "binding", admission.Create, &metav1.CreateOptions{}, false, u)
	}
	return []placementRequest{
		{"pod-create", podAttr(pod, nil, admission.Create, replicaSets), false},
		{"pod-update", podAttr(relabelled, pod, admission.Update, replicaSets), false},
		{"scheduler-binding", bindAttr(scheduler), false},
		{"pod-create-unlabelled", podAttr(unlabelled, nil, admission.Create, replicaSets), false},
		// a pod that names a pool is judged by the mutating call it makes anyway
		{"pod-create-tolerating-labelled", podAttr(tolerating, nil, admission.Create, admin), false},
		{"pod-create-tolerating", podAttr(unlabelledTolerating, nil, admission.Create, admin), true},
		{"pod-create-tolerating-default", podAttr(defaultTolerating, nil, admission.Create, admin), true},
		{"pod-create-nodename", podAttr(handPlaced, nil, admission.Create, admin), true},
		{"second-scheduler-binding", bindAttr(second), true}, // onto an unlisted node: sent until the controller writes its list
	}
}

// defaultedPod is bench/webhook's pod as the API server stores it: defaulted, with the
// service account's token volume and the default tolerations, pinned by P1.
func defaultedPod() *corev1.Pod {
	pod := benchPod("p-00001", "train-a100")
	pod.Namespace = "bench-1-1"
	pod.UID = "0b8f5c1e-6c39-4c1f-9b55-6c1f4b1d2a10"
	pod.Spec.NodeSelector = map[string]string{"runwhere.ai/pool": "train-a100"}
	sec, grace, exp, prio := int64(300), int64(30), int64(3607), int32(0)
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &sec},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &sec}}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Priority = &prio
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	c := &pod.Spec.Containers[0]
	c.TerminationMessagePath = "/dev/termination-log"
	c.ImagePullPolicy = corev1.PullAlways
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	}}}}}
	pod.Status.Phase = corev1.PodPending
	pod.Status.QOSClass = corev1.PodQOSBurstable
	return pod
}

// compiledEntry is a validating webhook entry with its match conditions compiled by
// the API server's compiler (as webhook/accessors.go does).
type compiledEntry struct {
	hook     admissionregistrationv1.ValidatingWebhook
	accessor webhook.WebhookAccessor
	matcher  matchconditions.Matcher
}

func compileEntries(hooks []admissionregistrationv1.ValidatingWebhook) []compiledEntry {
	compiler := celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	out := make([]compiledEntry, len(hooks))
	for i, h := range hooks {
		if h.ObjectSelector == nil { // as the API server defaults it: everything
			hooks[i].ObjectSelector = &metav1.LabelSelector{}
		}
		acc := make([]celplugin.ExpressionAccessor, len(h.MatchConditions))
		for j, c := range h.MatchConditions {
			acc[j] = &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression}
		}
		out[i] = compiledEntry{h, webhook.NewValidatingWebhookAccessor(h.Name, "bench", &hooks[i]), matchconditions.NewMatcher(compiler.CompileCondition(acc, celplugin.OptionalVariableDeclarations{HasAuthorizer: true},
			environment.StoredExpressions), h.FailurePolicy, "webhook", "validating", h.Name)}
	}
	return out
}

// admit is what the API server's validating dispatcher does with the entries for attr
// up to calling a webhook (generic/webhook.go, ShouldCallHook; the namespace selector
// left out): the entries whose rules and object selector match convert the request
// once to its version and evaluate their conditions. It returns whether any entry
// sends it.
func admit(tb testing.TB, entries []compiledEntry, attr admission.Attributes) bool {
	var va *admission.VersionedAttributes
	sent := false
	for _, e := range entries {
		matched := false
		for _, r := range e.hook.Rules {
			if m := (rules.Matcher{Rule: r, Attr: attr}); m.Matches() {
				matched = true
				break
			}
		}
		if !matched {
			continue
		}
		if ok, err := (&object.Matcher{}).MatchObjectSelector(e.accessor, attr); err != nil {
			tb.Fatal(err)
		} else if !ok {
			continue
		}
		if len(e.hook.MatchConditions) == 0 {
			sent = true
			continue
		}
		if va == nil {
			var err error
			if va, err = admission.NewVersionedAttributes(attr, attr.GetKind(), nil); err != nil {
				tb.Fatal(err)
			}
		}
		res := e.matcher.Match(context.Background(), va, nil, nil)
		require.NoError(tb, res.Error, "%s", e.hook.Name)
		sent = sent || res.Matches
	}
	return sent
}

// placementConfig is P6's entries of $WEBHOOKS_YAML (another configuration to measure),
// else of deploy/webhook/webhooks.yaml.
func placementConfig(tb testing.TB) []admissionregistrationv1.ValidatingWebhook {
	file := os.Getenv("WEBHOOKS_YAML")
	if file == "" {
		file = "../../deploy/webhook/webhooks.yaml"
	}
	w, err := loadConfigs(file)
	require.NoError(tb, err)
	w = w.keep(func(admissionregistrationv1.MutatingWebhook) bool { return false }, isPlacement)
	require.NotEmpty(tb, w.val.Webhooks, "P6's entries in %s", file)
	return w.val.Webhooks
}

// TestPlacementConditionsSend: the configuration sends what P6 is for and keeps the
// ordinary requests the benchmark measures off the wire.
func TestPlacementConditionsSend(t *testing.T) {
	entries := compileEntries(placementConfig(t))
	for _, r := range placementRequests() {
		require.Equal(t, r.sent, admit(t, entries, r.attr), r.name)
	}
}

// BenchmarkPlacementConditions is what P6's configuration costs the API server per
// request, by the API server's own match-condition compiler and evaluator: for each
// kind of request, every P6 entry whose rules match evaluates all its conditions (the
// API server does not stop at the first false one) on the request converted to CEL's
// input. "floor" is one entry with the single condition true on the same request: the
// conversion alone, which any match condition on that request costs.
func BenchmarkPlacementConditions(b *testing.B) {
	entries := compileEntries(placementConfig(b))
	floor := compileEntries([]admissionregistrationv1.ValidatingWebhook{{Name: "floor.runwhere.ai",
		Rules:           []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*", "*"}}}},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "true", Expression: "true"}}}})
	for _, r := range placementRequests() {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if admit(b, entries, r.attr) != r.sent {
					b.Fatal(r.name)
				}
			}
		})
		b.Run(r.name+"-floor", func(b *testing.B) {
			for b.Loop() {
				admit(b, floor, r.attr)
			}
		})
	}
}

// TestMayPassIsTheConditionsTwin: for pods the validating create entries see (no pool
// label, or "default"), their condition sends exactly the pods for which
// policy.MayPassExclusiveTaint, which the mutating call uses for labelled pods, says P6
// has something to judge.
func TestMayPassIsTheConditionsTwin(t *testing.T) {
	entries := compileEntries(placementConfig(t))
	admin := &user.DefaultInfo{Name: "kubernetes-admin"}
	tolerations := map[string][]corev1.Toleration{
		"none":             nil,
		"not-ready":        {{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
		"every-key":        {{Operator: corev1.TolerationOpExists}},
		"pool-exists":      {{Key: "runwhere.ai/pool", Operator: corev1.TolerationOpExists}},
		"pool-equal":       {{Key: "runwhere.ai/pool", Operator: corev1.TolerationOpEqual, Value: "train-a100", Effect: corev1.TaintEffectNoSchedule}},
		"pool-equal-empty": {{Key: "runwhere.ai/pool", Value: "default"}},
	}
	for _, label := range []string{"", "default"} {
		for tname, tol := range tolerations {
			for _, nodeName := range []string{"", "gpu-node-00001"} {
				pod := defaultedPod()
				delete(pod.Labels, "runwhere.ai/pool")
				if label != "" {
					pod.Labels["runwhere.ai/pool"] = label
				}
				pod.Spec.Tolerations, pod.Spec.NodeName = tol, nodeName
				pod.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
				attr := admission.NewAttributesRecord(pod, nil, pod.GroupVersionKind(), pod.Namespace, pod.Name,
					schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "", admission.Create, &metav1.CreateOptions{}, false, admin)
				require.Equal(t, policy.MayPassExclusiveTaint(pod), admit(t, entries, attr), "label %q, tolerations %s, nodeName %q", label, tname, nodeName)
			}
		}
	}
}
