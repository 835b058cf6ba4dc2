package certmanager

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const guard = "litepool-webhook-config-guard"

// TestWebhookHoldsNoCertificateRights: with the cert-manager component the webhook's
// identity may neither read nor write its webhook configurations or its certificate
// Secret (RBAC refuses, before any guard), and the webhook, run with exactly that
// identity's rights (launch), serves the issued certificate and admits a pool pod:
// --cert-mode=files writes no CA bundle.
func TestWebhookHoldsNoCertificateRights(t *testing.T) {
	install(t)
	serving := issued(t, servingSecret)
	injected(t, serving.Data["ca.crt"])
	admin := framework.C.Kube.AdmissionregistrationV1()
	webhook := as(t, webhookSA, saGroups...)

	val, err := admin.ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	require.NoError(t, err)
	_, err = webhook.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, val, metav1.UpdateOptions{})
	forbiddenByRBAC(t, err, "update the validating configuration")
	_, err = webhook.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	forbiddenByRBAC(t, err, "get the mutating configuration")
	_, err = webhook.CoreV1().Secrets(namespace).Get(ctx, servingSecret, metav1.GetOptions{})
	forbiddenByRBAC(t, err, "get its certificate Secret")
	_, err = webhook.CoreV1().Secrets(namespace).Update(ctx, serving, metav1.UpdateOptions{})
	forbiddenByRBAC(t, err, "update its certificate Secret")

	w := launch(t, "webhook", kubeletFiles(t, serving))
	callAt(t, w.Addr)
	got, err := createPod(t, "least-privilege")
	require.NoError(t, err)
	assert.Equal(t, trafficPool, got.Spec.NodeSelector["runwhere.ai/pool"], "litepool's pods webhook pinned the pod")
}

func forbiddenByRBAC(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, "the webhook's identity may %s", what)
	assert.True(t, apierrors.IsForbidden(err), "%s: %v", what, err)
	assert.NotContains(t, err.Error(), guard, "%s: RBAC refuses it, not the guard", what)
}

// TestCAInjectorHeldToCABundle: the component's guard holds cert-manager's CA injector
// (its chart's ServiceAccount, which may update every webhook configuration of the
// cluster) to the CA bundles of litepool's configurations. Rules, clientConfig,
// failure policies and the cert-manager.io/ annotations that name where it reads the
// CA are refused; a CA bundle is not, and the running injector (framework: as that
// identity) writes the CA back over it.
func TestCAInjectorHeldToCABundle(t *testing.T) {
	install(t)
	serving := issued(t, servingSecret)
	ca := serving.Data["ca.crt"]
	injected(t, ca)
	injector := as(t, framework.CAInjectorUser, framework.CAInjectorGroups...).AdmissionregistrationV1()

	for what, edit := range map[string]func(*admissionregistrationv1.ValidatingWebhook){
		"failurePolicy": func(w *admissionregistrationv1.ValidatingWebhook) {
			if ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail) == admissionregistrationv1.Fail {
				w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			} else {
				w.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
			}
		},
		"clientConfig": func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ClientConfig.Service, w.ClientConfig.URL = nil, ptr.To("https://attacker.example/validate")
		},
		"rules": func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules = w.Rules[:0] },
	} {
		err := retryConflict(func() error {
			val, err := injector.ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			edit(&val.Webhooks[0])
			_, err = injector.ValidatingWebhookConfigurations().Update(ctx, val, metav1.UpdateOptions{})
			return err
		})
		require.Error(t, err, "the CA injector's identity changed %s", what)
		assert.Contains(t, err.Error(), guard, what)
	}
	for _, patch := range []string{
		`{"metadata":{"annotations":{"cert-manager.io/inject-ca-from":"tenant/their-cert"}}}`,
		`{"metadata":{"annotations":{"cert-manager.io/inject-ca-from":null,"cert-manager.io/inject-ca-from-secret":"tenant/their-ca"}}}`,
	} {
		_, err := injector.MutatingWebhookConfigurations().Patch(ctx, configName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.Error(t, err, "the CA injector's identity changed where it reads the CA: %s", patch)
		assert.Contains(t, err.Error(), guard)
	}

	// What it is for: a CA bundle. Set to the CA twice (a valid bundle), the running
	// injector puts the CA back.
	require.NoError(t, retryConflict(func() error {
		mut, err := injector.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range mut.Webhooks {
			mut.Webhooks[i].ClientConfig.CABundle = bytes.Repeat(ca, 2)
		}
		_, err = injector.MutatingWebhookConfigurations().Update(ctx, mut, metav1.UpdateOptions{})
		return err
	}), "the CA injector's identity may write a CA bundle")
	injected(t, ca)
}

// TestControllerCannotRedirectTheInjector: the controller's identity may patch the
// validating configuration (P6's binding conditions), but not the cert-manager.io/
// annotations that tell the CA injector where to read the CA: refused by the guard.
// (Before the guard held the annotations, this patch was admitted.)
func TestControllerCannotRedirectTheInjector(t *testing.T) {
	install(t)
	injected(t, issued(t, servingSecret).Data["ca.crt"])
	controller := as(t, controllerSA, saGroups...).AdmissionregistrationV1()
	for _, patch := range []string{
		`{"metadata":{"annotations":{"cert-manager.io/inject-ca-from":"tenant/their-cert"}}}`,
		`{"metadata":{"annotations":{"cert-manager.io/inject-apiserver-ca":"true"}}}`,
	} {
		_, err := controller.ValidatingWebhookConfigurations().Patch(ctx, configName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.Error(t, err, "the controller's identity changed where the injector reads the CA: %s", patch)
		assert.Contains(t, err.Error(), guard)
	}
	val, err := framework.C.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"cert-manager.io/inject-ca-from": namespace + "/" + caSecret}, certManagerAnnotations(val.Annotations))
}

func certManagerAnnotations(all map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range all {
		if strings.HasPrefix(k, "cert-manager.io/") {
			out[k] = v
		}
	}
	return out
}
