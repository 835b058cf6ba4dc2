package install

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// guardName is the ValidatingAdmissionPolicy that holds litepool's identities to the CA
// bundle (deploy/webhook/webhook-config-guard.yaml).
const guardName = "litepool-webhook-config-guard"

// dryRun asks the API server to admit a write and persist nothing: a change the guard
// should refuse changes nothing even if it is let through.
var dryRun = metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}

// clientAs is a clientset that authenticates as namespace/sa's token alone.
func clientAs(t *testing.T, namespace, sa string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigAs(t, namespace, sa))
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kube
}

// The guard holds the ServiceAccounts of the namespace litepool was installed into: the
// webhook's identity may change its configurations' CA bundle and nothing else, the
// controller's may not change the other match conditions, and an administrator is not
// held. (testAtWork has the webhook inject its CA through the guard.)
func testGuard(t *testing.T, namespace string) {
	webhook := clientAs(t, namespace, webhookSA).AdmissionregistrationV1()
	refused := func(t *testing.T, what string, update func() error) {
		t.Helper()
		// A policy is enforced once the API server has loaded it: the guard was created
		// by the install, moments ago.
		var err error
		poll(t, what+" is refused", func() (bool, error) {
			err = update()
			return err != nil, nil
		})
		assert.Contains(t, err.Error(), guardName, what)
		assert.Contains(t, err.Error(), "system:serviceaccount:"+namespace+":", "the refusal names the identity: %v", err)
	}

	refused(t, "the webhook's identity adding pods/exec to its mutating rules", func() error {
		cfg, err := webhook.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		require.NoError(t, err, "the webhook reads its configuration (its CA bundle rotator)")
		cfg.Webhooks[0].Rules[0].Resources = append(cfg.Webhooks[0].Rules[0].Resources, "pods/exec")
		_, err = webhook.MutatingWebhookConfigurations().Update(ctx, cfg, dryRun)
		return err
	})
	refused(t, "the webhook's identity pointing its validating configuration elsewhere", func() error {
		cfg, err := webhook.ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		require.NoError(t, err)
		u := "https://attacker.example/validate"
		cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: cfg.Webhooks[0].ClientConfig.CABundle}
		_, err = webhook.ValidatingWebhookConfigurations().Update(ctx, cfg, dryRun)
		return err
	})
	controller := clientAs(t, namespace, controllerSA).AdmissionregistrationV1()
	refused(t, "the controller's identity raising a validating webhook's timeout", func() error {
		// RBAC gives the controller patch, not update, of its configuration.
		patch := []byte(`[{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 30}]`)
		_, err := controller.ValidatingWebhookConfigurations().Patch(ctx, configName, types.JSONPatchType, patch,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})

	// What the guard lets through: a new CA bundle from the webhook, any change from an
	// administrator. An error in the guard's own expressions would refuse these too.
	cfg, err := webhook.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range cfg.Webhooks {
		b := cfg.Webhooks[i].ClientConfig.CABundle
		cfg.Webhooks[i].ClientConfig.CABundle = append(append([]byte{}, b...), b...) // the same CA twice: a valid bundle
	}
	_, err = webhook.MutatingWebhookConfigurations().Update(ctx, cfg, dryRun)
	assert.NoError(t, err, "the webhook's identity may change its CA bundle")
	admin := framework.C.Kube.AdmissionregistrationV1()
	cfg, err = admin.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	require.NoError(t, err)
	cfg.Webhooks[0].Rules[0].Resources = append(cfg.Webhooks[0].Rules[0].Resources, "pods/exec")
	_, err = admin.MutatingWebhookConfigurations().Update(ctx, cfg, dryRun)
	if err != nil && strings.Contains(err.Error(), guardName) {
		t.Errorf("the guard holds an administrator: %v", err)
	}
	assert.NoError(t, err, "an administrator changes the rules")
}
