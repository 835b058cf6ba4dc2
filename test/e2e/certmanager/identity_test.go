package certmanager

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// litepool's two identities, as deploy/webhook binds them.
const (
	webhookSA    = "system:serviceaccount:litepool-system:litepool-webhook"
	controllerSA = "system:serviceaccount:litepool-system:litepool-controller"
)

// saGroups are the groups the API server gives a ServiceAccount of litepool's namespace.
var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:litepool-system", "system:authenticated"}

// as is a client acting as user (impersonated by the cluster's administrator).
func as(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(framework.C.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kube
}

// kubeconfigAs writes a kubeconfig acting as user, for a process of the test's.
func kubeconfigAs(t *testing.T, user string, groups ...string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(framework.C.Kubeconfig)
	require.NoError(t, err)
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = user, groups
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// waitGuardEnforced waits until the API server enforces the guard of the webhook
// configurations on the CA injector's identity: a ValidatingAdmissionPolicy takes
// effect a moment after it is created. The probe (a change of rules) is a dry run.
func waitGuardEnforced(t *testing.T) error {
	t.Helper()
	injector := as(t, framework.CAInjectorUser, framework.CAInjectorGroups...).AdmissionregistrationV1()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cfg, err := injector.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cfg.Webhooks[0].Rules[0].Resources = append(cfg.Webhooks[0].Rules[0].Resources, "pods/exec")
		_, err = injector.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), guard), nil
	})
	if err != nil {
		return fmt.Errorf("%s never refused the CA injector's identity a change of rules: %w", guard, err)
	}
	return nil
}
