package attack

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Issue 39: private registries for node work. The controller of this tier pulls node
// work with the operator's Secret (pullSecretFlags, TestMain); nothing a Pool editor or
// litepool-operator writes adds another.
const operatorsPullSecret = "litepool-registry"

var pullSecretFlags = []string{"--node-work-image-pull-secret=" + operatorsPullSecret}

// attackNodeWorkPullSecret: litepool-operator asks for its own pull secret in a
// StressRun (a spec field the CRD does not have, and an annotation); afterwards every
// piece of node work the tier made (remediation Jobs, re-check and stress pods, this
// run's) pulls with exactly the operator's Secret.
func attackNodeWorkPullSecret(t *testing.T) {
	nodes := nodeWorkPool(t, "at-ps-sr", 1, nil)
	dyn, err := dynamic.NewForConfig(asConfig(litepoolOp))
	require.NoError(t, err)
	run := (&unstructuredRun{Name: "at-ps-own-secret", Pool: "at-ps-sr", Nodes: nodes}).object()
	run.Object["spec"].(map[string]any)["imagePullSecrets"] = []any{map[string]any{"name": "operators-own-cred"}}
	run.SetAnnotations(map[string]string{"runwhere.ai/image-pull-secrets": "operators-own-cred"})
	var lastErr error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		_, lastErr = dyn.Resource(v1alpha1.StressRunResource).Create(ctx, run, metav1.CreateOptions{})
		return lastErr == nil, nil
	}), "litepool-operator creates StressRuns: %v", lastErr)
	var pods []corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		pods = nodeWorkPods(t, nodes[0])
		return len(pods) > 0, nil
	}), "no stress pod:\n%s", framework.W.Log)

	want := []corev1.LocalObjectReference{{Name: operatorsPullSecret}}
	jobs, err := framework.C.Kube.BatchV1().Jobs(nwNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=litepool"})
	require.NoError(t, err)
	all, err := framework.C.Kube.CoreV1().Pods(nwNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=litepool"})
	require.NoError(t, err)
	for _, j := range jobs.Items {
		assert.Equal(t, want, j.Spec.Template.Spec.ImagePullSecrets, "Job %s", j.Name)
	}
	for _, p := range append(append(all.Items, seenNodeWork...), pods...) {
		assert.Equal(t, want, p.Spec.ImagePullSecrets, "pod %s", p.Name)
	}
	t.Logf("%d Jobs and %d pods of node work pull with %s only", len(jobs.Items), len(all.Items)+len(seenNodeWork)+len(pods), operatorsPullSecret)
}

// attackLitepoolOpensTheGlass: litepool's own identities try the runbook's break-glass on
// N3's entry; the guard refuses both, and the entry keeps failing closed.
func attackLitepoolOpensTheGlass(t *testing.T) {
	const entry = "node-departures.runwhere.ai"
	index := func(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) int {
		return slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == entry })
	}
	webhook := as(t, webhookSA, saGroups()...).AdmissionregistrationV1()
	cfg, err := webhook.ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	i := index(cfg)
	require.GreaterOrEqual(t, i, 0)
	ignore := admissionregistrationv1.Ignore
	cfg.Webhooks[i].FailurePolicy = &ignore
	_, err = webhook.ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
	require.Error(t, err, "the webhook's identity opened the glass")
	assert.Contains(t, err.Error(), "litepool-webhook-config-guard")

	patch := fmt.Sprintf(`[{"op": "test", "path": "/webhooks/%d/name", "value": %q},
		{"op": "replace", "path": "/webhooks/%d/failurePolicy", "value": "Ignore"}]`, i, entry, i)
	_, err = as(t, controlSA, saGroups()...).AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx,
		"litepool-webhook", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	require.Error(t, err, "the controller's identity opened the glass")
	assert.Contains(t, err.Error(), "litepool-webhook-config-guard")

	cfg, err = framework.C.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, admissionregistrationv1.Fail, *cfg.Webhooks[index(cfg)].FailurePolicy)
}
