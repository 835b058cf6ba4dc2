package webhook

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	bgPool                  = "bg-train"
	bgNodeA, bgNodeB        = "bg-node-a", "bg-node-b"
	departures              = "node-departures.runwhere.ai"
	breakGlassEffectTimeout = 30 * time.Second
)

// breakGlass sets the failure policy of one validating entry as docs/runbook.md's
// break-glass does: a JSON patch found by name, with a test op that refuses the patch if
// the index holds another entry.
func breakGlass(t *testing.T, kube kubernetes.Interface, entry, policyValue string) {
	t.Helper()
	cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	i := -1
	for j, w := range cfg.Webhooks {
		if w.Name == entry {
			i = j
		}
	}
	require.GreaterOrEqual(t, i, 0, "entry %s in litepool-webhook", entry)
	patch := fmt.Sprintf(`[{"op": "test", "path": "/webhooks/%d/name", "value": %q},
		{"op": "replace", "path": "/webhooks/%d/failurePolicy", "value": %q}]`, i, entry, i, policyValue)
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, "litepool-webhook", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// failurePolicies maps each entry of both configurations to its failure policy.
func failurePolicies(t *testing.T, kube kubernetes.Interface) map[string]string {
	t.Helper()
	out := map[string]string{}
	mut, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	for _, w := range mut.Webhooks {
		out[w.Name] = string(*w.FailurePolicy)
	}
	val, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	for _, w := range val.Webhooks {
		out[w.Name] = string(*w.FailurePolicy)
	}
	return out
}

// shippedFailurePolicies are deploy/webhook's.
func shippedFailurePolicies(t *testing.T) map[string]string {
	t.Helper()
	cfgs, err := localwebhook.LoadConfigurations(filepath.Join(framework.Root, "deploy", "webhook", "webhooks.yaml"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, w := range cfgs.Mutating.Webhooks {
		out[w.Name] = string(*w.FailurePolicy)
	}
	for _, w := range cfgs.Validating.Webhooks {
		out[w.Name] = string(*w.FailurePolicy)
	}
	return out
}

// removeLabel is a departure: the node leaves its pool.
func removeLabel(kube kubernetes.Interface, node string) error {
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+policy.LabelPool+`":null}}}`), metav1.PatchOptions{})
	return err
}

// TestBreakGlass plays docs/runbook.md's break-glass: the webhook down, a departure
// refused because nothing answers; the one entry opened (Ignore); the departure admitted;
// the webhook back and the entry closed; and the proof: every failure policy as shipped,
// and N3 refusing the next departure below the pool's minNodes.
func TestBreakGlass(t *testing.T) {
	kube := framework.C.Kube
	crt := newCerts(t)
	port, err := localwebhook.FreePort()
	require.NoError(t, err)
	start := func() *localwebhook.Process { return launchOnPort(t, port, crt) }
	require.NoError(t, localwebhook.EnsureNamespace(ctx, kube, localwebhook.Namespace))
	proc := start()
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))

	pools := poolclient.New(framework.C.Dynamic)
	_, err = pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: bgPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.CreateReadyNode(t, kube, bgNodeA, bgPool)
	framework.CreateReadyNode(t, kube, bgNodeB, bgPool)
	t.Cleanup(func() { // without the webhook: the test leaves its pool at one member
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), "litepool-webhook", metav1.DeleteOptions{})
		for _, n := range []string{bgNodeA, bgNodeB} {
			_ = kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
		_ = pools.Delete(context.Background(), bgPool, metav1.DeleteOptions{})
	})
	framework.WaitInService(t, kube, bgNodeA, bgNodeB)

	proc.Kill()
	<-proc.Done()
	t.Run("webhook down: a departure is refused because nothing answers", func(t *testing.T) {
		var err error
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, breakGlassEffectTimeout, true, func(ctx context.Context) (bool, error) {
			err = removeLabel(kube, bgNodeB)
			return err != nil && strings.Contains(err.Error(), `failed calling webhook "`+departures+`"`), nil
		}), "the departure is refused by the failure policy: %v", err)
	})

	breakGlass(t, kube, departures, "Ignore")
	t.Run("glass open: the departure is admitted", func(t *testing.T) {
		var err error
		// The API server reloads a configuration asynchronously: retried until it has.
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, breakGlassEffectTimeout, true, func(ctx context.Context) (bool, error) {
			err = removeLabel(kube, bgNodeB)
			return err == nil, nil
		}), "the departure goes through the open glass: %v", err)
		n, err := kube.CoreV1().Nodes().Get(ctx, bgNodeB, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, n.Labels, policy.LabelPool)
		assert.Equal(t, "Ignore", failurePolicies(t, kube)[departures])
	})

	start()
	breakGlass(t, kube, departures, "Fail")
	t.Run("glass closed: every failure policy is as shipped", func(t *testing.T) {
		assert.Equal(t, shippedFailurePolicies(t), failurePolicies(t, kube))
	})
	t.Run("glass closed: N3 refuses the departure below minNodes", func(t *testing.T) {
		var err error
		// Until the API server has the closed entry and the webhook's cache has bg-node-b
		// out of the pool, the answer may be another; N3's is the one awaited.
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, breakGlassEffectTimeout, true, func(ctx context.Context) (bool, error) {
			_, err = kube.CoreV1().Nodes().Patch(ctx, bgNodeA, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+policy.LabelPool+`":null}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil && strings.Contains(err.Error(), `admission webhook "`+departures+`" denied the request`), nil
		}), "N3 is enforced again: %v", err)
		assert.Equal(t, []string{"N3"}, policy.RulesOfStatus(err))
		n, err := kube.CoreV1().Nodes().Get(ctx, bgNodeA, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, bgPool, n.Labels[policy.LabelPool])
	})
}
