package attack

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Issue 39: certificates. Rows that need cert-manager's controller and CA injector
// running are played by test/e2e/certmanager, which runs them; here they are
// playedIn that package: the row checks its test is there and skips.

// playedIn is the run of a row whose attack is played by test test of the e2e package
// pkg (one that starts what the attack needs). It fails if that test is gone, so a row
// cannot outlive its test, and otherwise skips, naming where it is played.
func playedIn(pkg, test string) func(t *testing.T) {
	return func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(framework.Root, "test", "e2e", pkg, "*_test.go"))
		require.NoError(t, err)
		declared := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(test) + `\(t \*testing\.T\) \{`)
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			if declared.Match(src) {
				t.Skipf("played by %s in test/e2e/%s (%s): it needs cert-manager running", test, pkg, filepath.Base(f))
			}
		}
		t.Fatalf("no test %s in test/e2e/%s plays this row", test, pkg)
	}
}

// attackControllerRedirectsTheInjector: the controller's identity may patch the
// validating configuration, for P6's binding conditions. The cert-manager.io/
// annotations tell cert-manager's CA injector where to read the CA it writes into the
// bundles; pointing them at a Certificate of a tenant's, or at the API server's CA,
// would choose what the API server trusts for litepool's webhooks. The guard keeps them
// as applied (before issue 39's change it did not look at metadata: both were admitted).
func attackControllerRedirectsTheInjector(t *testing.T) {
	controller := as(t, controlSA, saGroups()...).AdmissionregistrationV1()
	before, err := framework.C.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	for _, patch := range []string{
		`{"metadata":{"annotations":{"cert-manager.io/inject-ca-from":"tenant/their-ca"}}}`,
		`{"metadata":{"annotations":{"cert-manager.io/inject-ca-from-secret":"tenant/their-ca"}}}`,
		`{"metadata":{"annotations":{"cert-manager.io/inject-apiserver-ca":"true"}}}`,
	} {
		_, err := controller.ValidatingWebhookConfigurations().Patch(ctx, "litepool-webhook", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.Error(t, err, "the controller's identity changed where the CA injector reads the CA: %s", patch)
		assert.Contains(t, err.Error(), "litepool-webhook-config-guard")
	}
	after, err := framework.C.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.Annotations, after.Annotations)
}

// attackControllerWritesCABundle: the controller's identity never writes a CA bundle
// (it patches its binding conditions by JSON patch), but the guard let it: a CA of its
// choosing beside litepool's in the validating configuration, with pods of its own in
// litepool's namespace behind the webhook's Service, would have let it answer reviews
// itself. RBAC refuses an update (it may only patch); the guard now refuses the patch;
// the bundles stay.
func attackControllerWritesCABundle(t *testing.T) {
	controller := as(t, controlSA, saGroups()...).AdmissionregistrationV1()
	cfg, err := controller.ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	before := cfg.Webhooks[0].ClientConfig.CABundle
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = rotate(cfg.Webhooks[i].ClientConfig.CABundle)
	}
	_, err = controller.ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
	require.Error(t, err, "the controller's identity wrote the CA bundles")
	assert.True(t, apierrors.IsForbidden(err), "RBAC gives it patch, not update: %v", err)
	patch := `[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "` + base64.StdEncoding.EncodeToString(rotate(before)) + `"}]`
	_, err = controller.ValidatingWebhookConfigurations().Patch(ctx, "litepool-webhook", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	require.Error(t, err, "the controller's identity patched a CA bundle")
	assert.Contains(t, err.Error(), "litepool-webhook-config-guard")
	after, err := framework.C.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before, after.Webhooks[0].ClientConfig.CABundle)
}
