package attack

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/admission"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/controller"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func attackNodeName(t *testing.T) {
	p := gpuPod("pinned", "8")
	p.Spec.NodeName, p.Spec.Tolerations = exclNodes[0], tolerateAll
	_, err := as(t, tenant).CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[P6]")
	assert.Empty(t, podsOn(t, foreignNS, exclNodes[0]))
}

// labelledPod is a device-free pod with the pool label value, bound to an exclusive
// node and tolerating everything.
func labelledPod(name, pool string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"runwhere.ai/pool": pool}},
		Spec: corev1.PodSpec{NodeName: exclNodes[2], Tolerations: tolerateAll, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
}

func attackLabelledNodeName(t *testing.T) {
	_, err := as(t, tenant).CoreV1().Pods(foreignNS).Create(ctx, labelledPod("labelled", statusPool), metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "pods.runwhere.ai" denied the request: [P6] pod at-foreign/labelled may not run on node "at-excl-3"`)
	assert.Empty(t, podsOn(t, foreignNS, exclNodes[2]))
}

func attackDefaultLabelNodeName(t *testing.T) {
	_, err := as(t, tenant).CoreV1().Pods(foreignNS).Create(ctx, labelledPod("default-labelled", "default"), metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "pod-placement-default-label.runwhere.ai" denied the request: [P6] pod at-foreign/default-labelled may not run on node "at-excl-3"`)
	_, err = as(t, tenant).CoreV1().Pods(foreignNS).Create(ctx, labelledPod("empty-labelled", ""), metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[P6] pod at-foreign/empty-labelled may not run on node "at-excl-3"`)
	assert.Empty(t, podsOn(t, foreignNS, exclNodes[2]))
}

func attackForgedDaemonSetOwner(t *testing.T) {
	kube := as(t, tenant)
	ds := daemonSet("decoy", nil, corev1.ResourceList{})
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"at-no-such-label": "x"}
	created, err := kube.AppsV1().DaemonSets(foreignNS).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
	p := gpuPod("forged-owner", "8")
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: created.Name, UID: created.UID, Controller: new(true)}}
	p.Spec.NodeName, p.Spec.Tolerations = exclNodes[1], tolerateAll
	_, err = kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.Error(t, err, "a pod that names a DaemonSet as its owner is no DaemonSet pod")
	assert.Contains(t, err.Error(), `[P6] pod at-foreign/forged-owner may not run on node "at-excl-2"`)
	assert.Empty(t, podsOn(t, foreignNS, exclNodes[1]))
}

// daemonSet runs on the named nodes, tolerating everything, asking for res.
func daemonSet(name string, nodes []string, res corev1.ResourceList) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: corev1.PodSpec{
			Tolerations: tolerateAll,
			Containers:  []corev1.Container{{Name: "agent", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: res}}}}}}}
	if len(nodes) > 0 {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: nodes}}}}}}}
	}
	return ds
}

// daemonPodNodes maps the nodes a DaemonSet's pods are made for (the controller pins
// each by matchFields) to whether the pod runs there.
func daemonPodNodes(t *testing.T, name string) map[string]bool {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Pods(foreignNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	out := map[string]bool{}
	for _, p := range list.Items {
		a := p.Spec.Affinity
		if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			continue
		}
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				for _, n := range f.Values {
					out[n] = p.Status.Phase == corev1.PodRunning
				}
			}
		}
	}
	return out
}

func attackDaemonSetWithGPUs(t *testing.T) {
	kube := as(t, tenant)
	gpu := corev1.ResourceList{"nvidia.com/gpu": resourceQty("8")}
	_, err := kube.AppsV1().DaemonSets(foreignNS).Create(ctx, daemonSet("gpu-agent", []string{exclNodes[2], floorNodes[0]}, gpu), metav1.CreateOptions{})
	require.NoError(t, err)
	// The answer for the exclusive node is in once its pod was made, or once P6 refused
	// the DaemonSet controller's create of it (the webhook's log says so). Neither the
	// pod for the ordinary node nor the controller's FailedCreate event can be waited
	// for: the controller creates a sync's pods in slow-start batches that stop at the
	// first refusal, in no fixed node order, and backs off after each.
	var got map[string]bool
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got = daemonPodNodes(t, "gpu-agent")
		_, made := got[exclNodes[2]]
		return made || deniedByP6(t, "gpu-agent-"), nil
	}), "gpu-agent pods: %v", got)
	assert.NotContains(t, got, exclNodes[2], "a DaemonSet pod asking for GPUs is no node agent")
}

// deniedByP6 says whether the webhook's log records the DaemonSet controller's create of
// a pod whose name starts with prefix refused by P6, or refused by P4 as pinned to the
// exclusive pool (the mutating call judges a pin first, and sees no generated name yet).
func deniedByP6(t *testing.T, prefix string) bool {
	t.Helper()
	log, err := os.ReadFile(framework.W.Log)
	require.NoError(t, err)
	for _, line := range strings.Split(string(log), "\n") {
		if !strings.Contains(line, `"msg":"denied"`) || !strings.Contains(line, `"user":"system:serviceaccount:kube-system:daemon-set-controller"`) {
			continue
		}
		byP6 := strings.Contains(line, `"name":"`+prefix) && strings.Contains(line, `"rules":["P6"]`)
		byPin := strings.Contains(line, `"rules":["P4"]`) && strings.Contains(line, `pins it to pool \"`+exclPool+`\"`)
		if byP6 || byPin {
			return true
		}
	}
	return false
}

func attackSchedulingGate(t *testing.T) {
	kube := as(t, tenant)
	p := gpuPod("gated", "8")
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	p.Spec.Tolerations = tolerateAll
	// Placed on at-later-1 or a node of another pool: no one pool's pod (a placement
	// only at-later's members satisfy would make it at-later's, and P4 would refuse it
	// at once, 38.2), so admitted while at-later is not exclusive.
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{laterNodes[0], statusNode}}}}}}}}
	_, err := kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err, "its node is not exclusive yet")
	_, err = poolclient.New(framework.C.Dynamic).Patch(ctx, laterPool, types.MergePatchType, []byte(`{"spec":{"exclusive":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitTaint(t, framework.C.Kube, laterNodes[0], true)
	_, err = kube.CoreV1().Pods(foreignNS).Patch(ctx, "gated", types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
	require.Error(t, err, "removing the last gate releases the pod onto a node that is exclusive now")
	assert.Contains(t, err.Error(), `[P6] pod at-foreign/gated may not run on node "at-later-1": it tolerates the pool's taint`)
	got, err := framework.C.Kube.CoreV1().Pods(foreignNS).Get(ctx, "gated", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, got.Spec.SchedulingGates)
	assert.Empty(t, got.Spec.NodeName)
}

func attackDenialsLeakNothing(t *testing.T) {
	kube := as(t, tenant)
	others := []string{"train-a100", "dev-sandbox", floorPool, laterPool, ownNS}
	p := gpuPod("no-such-pool", "1")
	p.Labels = map[string]string{policy.LabelPool: "at-nosuch", policy.LabelWorkloadType: "development"}
	_, err := kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[P2] pool "at-nosuch" (label runwhere.ai/pool) does not exist`)
	p = gpuPod("not-admitted", "1")
	p.Labels = map[string]string{policy.LabelPool: exclPool, policy.LabelWorkloadType: "development"}
	_, err2 := kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.Error(t, err2)
	assert.Contains(t, err2.Error(), `[P4] namespace "at-foreign" may not use pool "at-excl"`)
	for _, e := range []error{err, err2} {
		t.Log(e)
		for _, o := range others {
			assert.NotContains(t, e.Error(), o, "a denial names another pool or a namespace another team uses")
		}
	}
}

func unboundPod(t *testing.T, name string) {
	t.Helper()
	p := gpuPod(name, "1")
	p.Spec.SchedulerName = "no-such-scheduler"
	_, err := framework.C.Kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
}

func assertUnbound(t *testing.T, name string) {
	t.Helper()
	got, err := framework.C.Kube.CoreV1().Pods(foreignNS).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, got.Spec.NodeName)
}

func attackBindingsResource(t *testing.T) {
	unboundPod(t, "bound-by-bindings")
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound-by-bindings"}, Target: corev1.ObjectReference{Kind: "Node", Name: exclNodes[0]}}
	err := as(t, scheduler2).CoreV1().RESTClient().Post().Namespace(foreignNS).Resource("bindings").Body(b).Do(ctx).Error()
	require.Error(t, err, "POST .../bindings is the same binding as pods/binding")
	assert.Contains(t, err.Error(), `[P6] pod at-foreign/bound-by-bindings may not run on node "at-excl-1": it is bound to the node`)
	assertUnbound(t, "bound-by-bindings")
}

func attackPodsBinding(t *testing.T) {
	unboundPod(t, "bound-by-subresource")
	err := as(t, scheduler2).CoreV1().Pods(foreignNS).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound-by-subresource"},
		Target: corev1.ObjectReference{Kind: "Node", Name: exclNodes[0]}}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[P6]")
	assertUnbound(t, "bound-by-subresource")
}

func attackBindClaimedAgent(t *testing.T) {
	kube := as(t, tenant)
	ds, err := kube.AppsV1().DaemonSets(foreignNS).Get(ctx, "decoy", metav1.GetOptions{})
	require.NoError(t, err)
	p := gpuPod("claims-agent", "1")
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	p.Spec.SchedulerName = "no-such-scheduler"
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)}}
	_, err = kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err, "no toleration, no nodeName: the taint keeps it off")
	err = as(t, scheduler2).CoreV1().Pods(foreignNS).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "claims-agent"},
		Target: corev1.ObjectReference{Kind: "Node", Name: exclNodes[0]}}, metav1.CreateOptions{})
	require.Error(t, err, "bound past a taint the pod does not tolerate")
	assert.Contains(t, err.Error(), `[P6] pod at-foreign/claims-agent may not run on node "at-excl-1": it is bound to the node`)
	assertUnbound(t, "claims-agent")
}

// forgedDeparture is a review of a member's deletion whose oldObject says the node is
// NotReady and forced: what a caller with no credentials can write.
func forgedDeparture(t *testing.T, node, pool string) []byte {
	t.Helper()
	old := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: node, UID: uuid.NewUUID(),
		Labels: map[string]string{policy.LabelPool: pool}, Annotations: map[string]string{policy.AnnotationForce: "mallory: forged"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}}
	raw, err := json.Marshal(old)
	require.NoError(t, err)
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: uuid.NewUUID(), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: node, Operation: admissionv1.Delete,
			UserInfo: authnUser("system:admin"), OldObject: runtime.RawExtension{Raw: raw}}}
	out, err := json.Marshal(review)
	require.NoError(t, err)
	return out
}

// post sends body to the webhook as a client with no credentials, which does not
// check the server's certificate either (it has no reason to).
func post(t *testing.T, path string, body []byte) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the attacker's client
	resp, err := c.Post("https://"+framework.W.Process.Addr+path, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

func attackForgedReviews(t *testing.T) {
	for _, n := range floorNodes[:2] {
		t.Logf("forged DELETE of %s: %s", n, post(t, admission.PathNodes, forgedDeparture(t, n, floorPool)))
	}
	t.Logf("forged DELETE naming an unknown pool: %s", post(t, admission.PathNodes, forgedDeparture(t, "ghost", "at-random-pool")))
	cms := framework.C.Kube.CoreV1().ConfigMaps(localwebhook.Namespace)
	_, err := cms.Get(ctx, admission.ConfigMapName("at-random-pool"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a review naming a pool that does not exist creates no ConfigMap: %v", err)
	cm, err := cms.Get(ctx, admission.ConfigMapName(floorPool), metav1.GetOptions{})
	if err == nil {
		for _, n := range floorNodes[:2] {
			assert.NotContains(t, cm.Data, n, "a forged review reserved the departure of %s", n)
		}
	} else {
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	}
	// The operator's departure of one member of four (minNodes 2) is safe.
	_, err = framework.C.Kube.CoreV1().Nodes().Patch(ctx, floorNodes[2], types.MergePatchType, []byte(`{"metadata":{"labels":{"runwhere.ai/pool":null}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "a safe departure is refused because of reservations nobody authenticated")
	_, err = framework.C.Kube.CoreV1().Nodes().Patch(ctx, floorNodes[2], types.MergePatchType, []byte(`{"metadata":{"labels":{"runwhere.ai/pool":"`+floorPool+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

func authnUser(name string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: name}
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }

func saGroups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:litepool-system"}
}

func attackWebhookRewritesItsConfig(t *testing.T) {
	adm := as(t, webhookSA, saGroups()...).AdmissionregistrationV1()
	for _, change := range []struct {
		what string
		edit func(w *admissionregistrationv1.MutatingWebhook)
	}{
		{"rules", func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules[0].Resources = append(w.Rules[0].Resources, "pods/exec")
		}},
		{"clientConfig", func(w *admissionregistrationv1.MutatingWebhook) {
			u := "https://attacker.example/mutate"
			w.ClientConfig.URL = &u
		}},
		{"matchPolicy", func(w *admissionregistrationv1.MutatingWebhook) {
			e := admissionregistrationv1.Exact
			w.MatchPolicy = &e
		}},
		{"objectSelector", func(w *admissionregistrationv1.MutatingWebhook) { w.ObjectSelector = &metav1.LabelSelector{} }},
	} {
		cfg, err := adm.MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		require.NoError(t, err, "the webhook reads its configuration (its CA bundle rotator)")
		change.edit(&cfg.Webhooks[0])
		_, err = adm.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
		require.Error(t, err, "the webhook's identity changed %s of its mutating configuration", change.what)
		assert.Contains(t, err.Error(), "litepool-webhook-config-guard", change.what)
	}
	vcfg, err := adm.ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	ignore := admissionregistrationv1.Ignore
	vcfg.Webhooks[0].FailurePolicy = &ignore
	vcfg.Webhooks[len(vcfg.Webhooks)-1].Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
	_, err = adm.ValidatingWebhookConfigurations().Update(ctx, vcfg, metav1.UpdateOptions{})
	require.Error(t, err, "the webhook's identity changed failurePolicy and rules of its validating configuration")
	// What it is for: a new CA bundle (here the same CA twice, a valid bundle).
	for range 2 {
		cfg, err := adm.MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		require.NoError(t, err)
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = rotate(cfg.Webhooks[i].ClientConfig.CABundle)
		}
		_, err = adm.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
		require.NoError(t, err, "the webhook may rotate its CA bundle")
	}
}

// rotate is the test CA bundle doubled, or back to single.
func rotate(b []byte) []byte {
	if bytes.Equal(b, framework.W.CAPEM) {
		return append(slices.Clone(b), framework.W.CAPEM...)
	}
	return slices.Clone(framework.W.CAPEM)
}

func attackControllerRewritesConfig(t *testing.T) {
	adm := as(t, controlSA, saGroups()...).AdmissionregistrationV1()
	cfg, err := adm.ValidatingWebhookConfigurations().Get(ctx, controller.WebhookConfiguration, metav1.GetOptions{})
	require.NoError(t, err)
	wi := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name == controller.PlacementBindingsWebhook
	})
	require.GreaterOrEqual(t, wi, 0)
	// Another entry's condition (P6's pod entries have theirs): not the controller's.
	oi := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name != controller.PlacementBindingsWebhook && len(w.MatchConditions) > 0
	})
	require.GreaterOrEqual(t, oi, 0)
	for _, p := range []string{
		fmt.Sprintf(`[{"op":"replace","path":"/webhooks/%d/failurePolicy","value":"Ignore"}]`, wi),
		fmt.Sprintf(`[{"op":"replace","path":"/webhooks/%d/matchConditions/0/expression","value":"false"}]`, oi),
		fmt.Sprintf(`[{"op":"remove","path":"/webhooks/%d/matchConditions/0"}]`, oi),
		fmt.Sprintf(`[{"op":"add","path":"/webhooks/%d/matchConditions/-","value":{"name":"binding-onto-an-exclusive-nodes","expression":"false"}}]`, wi),
		`[{"op":"add","path":"/webhooks/0/matchConditions/-","value":{"name":"binding-onto-an-exclusive-node-2","expression":"false"}}]`,
		fmt.Sprintf(`[{"op":"replace","path":"/webhooks/%d/clientConfig/url","value":"https://attacker.example/"}]`, wi),
	} {
		_, err := adm.ValidatingWebhookConfigurations().Patch(ctx, controller.WebhookConfiguration, types.JSONPatchType, []byte(p), metav1.PatchOptions{})
		require.Error(t, err, p)
		assert.Contains(t, err.Error(), "litepool-webhook-config-guard", p)
	}
	ci := slices.IndexFunc(cfg.Webhooks[wi].MatchConditions, func(c admissionregistrationv1.MatchCondition) bool {
		return c.Name == controller.BindingTargetsCondition
	})
	require.GreaterOrEqual(t, ci, 0)
	// A further slice, then "true" for the first, which sends every binding, the
	// scheduler's too (the exemption is part of the controller's condition): availability
	// only, and the controller writes its conditions back.
	_, err = adm.ValidatingWebhookConfigurations().Patch(ctx, controller.WebhookConfiguration, types.JSONPatchType,
		fmt.Appendf(nil, `[{"op":"add","path":"/webhooks/%d/matchConditions/-","value":{"name":"binding-onto-an-exclusive-node-2","expression":"true"}}]`, wi), metav1.PatchOptions{})
	require.NoError(t, err, "the controller adds a binding-targets condition")
	_, err = adm.ValidatingWebhookConfigurations().Patch(ctx, controller.WebhookConfiguration, types.JSONPatchType,
		fmt.Appendf(nil, `[{"op":"replace","path":"/webhooks/%d/matchConditions/%d/expression","value":"true"}]`, wi, ci), metav1.PatchOptions{})
	require.NoError(t, err, "the controller writes the binding targets")
}

func attackRemoveTaint(t *testing.T) {
	_, err := as(t, nodePatcher).CoreV1().Nodes().Patch(ctx, exclNodes[0], types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
	require.NoError(t, err, "patch nodes removes taints: the right gives it")
	waitTaint(t, framework.C.Kube, exclNodes[0], true)
}

func attackStatusLabel(t *testing.T) {
	_, err := as(t, npd).CoreV1().Nodes().Patch(ctx, statusNode, types.MergePatchType, []byte(`{"metadata":{"labels":{"runwhere.ai/pool":null}}}`), metav1.PatchOptions{}, "status")
	require.Error(t, err, "a label removed through nodes/status departs as one removed through nodes")
	assert.Contains(t, err.Error(), "[N3]")
	n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, statusNode, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, statusPool, n.Labels[policy.LabelPool])
}

func attackResourceSlice(t *testing.T) {
	node := exclNodes[1]
	before, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "forged-" + node}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1, Generation: 1},
		Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}}
	_, err = as(t, draDriver).ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
	require.NoError(t, err)
	// A departure judged after the slice: one of four members of a pool with a floor of 2.
	_, err = framework.C.Kube.CoreV1().Nodes().Patch(ctx, floorNodes[3], types.MergePatchType, []byte(`{"metadata":{"labels":{"runwhere.ai/pool":null}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = framework.C.Kube.CoreV1().Nodes().Patch(ctx, floorNodes[3], types.MergePatchType, []byte(`{"metadata":{"labels":{"runwhere.ai/pool":"`+floorPool+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	after, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.Spec.Taints, after.Spec.Taints)
	assert.Equal(t, before.Spec.Unschedulable, after.Spec.Unschedulable)
}

// attackStatusRelease: a node held out by hand, whose entry a writer of pools/status
// rewrites to have it returned: as the old release did (state Released), and by removing
// it. Each time the loop writes the entry back (HeldOut) and the taint stays.
func attackStatusRelease(t *testing.T) {
	framework.C.MustLitepool(t, "health", "hold", healthNode, "--reason", "attack matrix")
	waitHealth(t, v1alpha1.NodeHealthHeldOut, true)
	dyn, err := dynamic.NewForConfig(asConfig(poolStatus))
	require.NoError(t, err)
	pools := dyn.Resource(v1alpha1.GroupVersion.WithResource("pools"))
	since := time.Now().UTC().Format(time.RFC3339)
	for _, patch := range []string{
		`{"status":{"nodeHealth":[{"node":"` + healthNode + `","state":"Released","by":"mallory","since":"` + since + `"}]}}`,
		`{"status":{"nodeHealth":null}}`,
	} {
		_, err := pools.Patch(ctx, healthPool, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		require.NoError(t, err, "pools/status: the right gives the write")
		waitHealth(t, v1alpha1.NodeHealthHeldOut, true)
	}
	out := framework.C.MustLitepool(t, "health", "release", healthNode)
	assert.Contains(t, out, "released")
	waitHealth(t, "", false)
}

// waitHealth waits until the loop has written healthNode's entry in state (any state
// but Released when state is ""; no entry counts as in service), then checks the
// quarantine taint is on (out) or off.
func waitHealth(t *testing.T, state v1alpha1.NodeHealthState, out bool) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := poolclient.New(framework.C.Dynamic).Get(ctx, healthPool)
		if err != nil {
			return false, err
		}
		got := v1alpha1.NodeHealthState("")
		for _, e := range p.Status.NodeHealth {
			if e.Node == healthNode {
				got = e.State
			}
		}
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, healthNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tainted := policy.QuarantineTaintOf(n) != nil
		last = fmt.Sprintf("entry %q, tainted %v", got, tainted)
		if got == v1alpha1.NodeHealthReleased || (state != "" && got != state) {
			return false, nil
		}
		if state == "" && got != "" && got != v1alpha1.NodeHealthHealthy {
			return false, nil
		}
		return tainted == out, nil
	})
	require.NoError(t, err, "node %s: wanted entry %q and out=%v; last %s", healthNode, state, out, last)
}

// attackPinnedByNodeSelector: a pod that names no pool by label, pinned to an exclusive
// pool by its nodeSelector and tolerating its taint (what Kueue's flavor writes on the
// Jobs it admits), from a namespace the pool does not admit.
func attackPinnedByNodeSelector(t *testing.T) {
	kube := as(t, tenant)
	p := gpuPod("pinned-by-selector", "8")
	p.Labels = map[string]string{policy.LabelWorkloadType: "development"}
	p.Spec.NodeSelector = map[string]string{policy.LabelPool: exclPool}
	p.Spec.Tolerations = []corev1.Toleration{policy.ExclusivePoolToleration(exclPool)}
	_, err := kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), `admission webhook "pods-node-selector.runwhere.ai" denied the request: [P4] the pod's nodeSelector runwhere.ai/pool=at-excl pins it to pool "at-excl"`)
	assert.Contains(t, err.Error(), `namespace "at-foreign" may not use pool "at-excl"`)

	// Labelled "default" (no pool), it is judged as the pool's pod all the same (38.2).
	p.Name, p.Labels[policy.LabelPool] = "pinned-default-label", policy.DefaultPool
	_, err = kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "pods-pinned-default-label.runwhere.ai" denied the request`)
	assert.Contains(t, err.Error(), `[P4] the pod's nodeSelector runwhere.ai/pool=at-excl pins it to pool "at-excl"`)
	for _, name := range []string{"pinned-by-selector", "pinned-default-label"} {
		_, err := framework.C.Kube.CoreV1().Pods(foreignNS).Get(ctx, name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "pod %s was made: %v", name, err)
	}
}
