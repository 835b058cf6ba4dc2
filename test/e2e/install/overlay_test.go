package install

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// overlayHeader is the first line of the overlay docs/install.md shows for an install
// into another namespace.
const overlayHeader = "# gpu-ops/kustomization.yaml"

// remoteRef is how the docs' overlay names deploy/webhook: a GitHub URL at a release.
var remoteRef = regexp.MustCompile(`https://github\.com/runwhere-ai/litepool//([^?\s]+)\?ref=\S+`)

// writeDocOverlay writes the overlay of docs/install.md ("Into another namespace") into a
// directory of its own, with this checkout in place of the release it names, and
// returns the directory: what the docs tell operators to write is what is tested.
func writeDocOverlay(t *testing.T, components ...string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(framework.Root, "docs", "install.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "```yaml\n"+overlayHeader+"\n")
	require.True(t, ok, "docs/install.md shows the overlay %q", overlayHeader)
	overlay, _, ok := strings.Cut(rest, "```")
	require.True(t, ok, "the overlay's block ends")
	require.Contains(t, overlay, "namespace: "+otherNamespace)
	// kustomize takes no absolute path: the checkout is named relative to the overlay.
	dir := t.TempDir()
	root, err := filepath.Rel(dir, framework.Root)
	require.NoError(t, err)
	root = filepath.ToSlash(root)
	overlay = remoteRef.ReplaceAllString(overlay, root+"/$1")
	if len(components) > 0 {
		overlay += "components:\n"
		for _, c := range components {
			overlay += "- " + root + "/deploy/webhook/components/" + c + "\n"
		}
	}
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), []byte(overlay))
	return dir
}

// The overlay of docs/install.md renders an install consistent in gpu-ops, with every
// component: litepool-system is named nowhere, every RoleBinding binds ServiceAccounts
// of gpu-ops, every webhook calls gpu-ops and the pod webhooks leave gpu-ops (not
// litepool-system) out, and the guard holds the ServiceAccounts of gpu-ops. Before
// deploy/webhook/namespace, `namespace:` alone left all of these in litepool-system.
func TestRenderedIntoAnotherNamespace(t *testing.T) {
	dir := writeDocOverlay(t, "cert-manager", "kueue", "network-policy", "health")
	res := framework.C.Kubectl(t, "", "kustomize", dir)
	require.Zero(t, res.ExitCode, res.Stderr)
	for i, line := range strings.Split(res.Stdout, "\n") {
		assert.NotContains(t, line, defaultNamespace, "rendered line %d", i+1)
	}
	var subjects, services, selectors int
	var guard admissionregistrationv1.ValidatingAdmissionPolicySpec
	for _, doc := range strings.Split(res.Stdout, "\n---\n") {
		var obj struct {
			Kind     string                                                `json:"kind"`
			Metadata metav1.ObjectMeta                                     `json:"metadata"`
			Subjects []rbacv1.Subject                                      `json:"subjects"`
			Webhooks []admissionregistrationv1.ValidatingWebhook           `json:"webhooks"`
			Spec     admissionregistrationv1.ValidatingAdmissionPolicySpec `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj.Kind == "ValidatingAdmissionPolicy" && obj.Metadata.Name == guardName {
			guard = obj.Spec
		}
		for _, s := range obj.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind {
				assert.Equal(t, otherNamespace, s.Namespace, "%s %s binds %s", obj.Kind, obj.Metadata.Name, s.Name)
				subjects++
			}
		}
		for _, w := range obj.Webhooks {
			if s := w.ClientConfig.Service; s != nil {
				assert.Equal(t, otherNamespace, s.Namespace, "%s calls", w.Name)
				services++
			}
			if w.NamespaceSelector == nil {
				continue
			}
			for _, e := range w.NamespaceSelector.MatchExpressions {
				if e.Key == "kubernetes.io/metadata.name" {
					assert.Equal(t, metav1.LabelSelectorOpNotIn, e.Operator, w.Name)
					assert.ElementsMatch(t, []string{"kube-system", otherNamespace}, e.Values, "%s leaves out", w.Name)
					selectors++
				}
			}
		}
	}
	// The guard holds the ServiceAccounts of gpu-ops (TestInstallIntoAnotherNamespace
	// plays it): both expressions that name litepool's identities name them there.
	require.Len(t, guard.MatchConditions, 1, "the guard's match condition")
	require.Len(t, guard.Variables, 1, "the guard's variable")
	for _, expr := range []string{guard.MatchConditions[0].Expression, guard.Variables[0].Expression} {
		assert.Contains(t, expr, "'system:serviceaccount:"+otherNamespace+":", "the guard's identities")
	}
	assert.GreaterOrEqual(t, subjects, 10, "the RoleBindings' ServiceAccount subjects were found")
	assert.GreaterOrEqual(t, services, 9, "the webhooks' services were found")
	assert.GreaterOrEqual(t, selectors, 6, "the pod webhooks' namespace selectors were found")
}
