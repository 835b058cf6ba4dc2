package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// TestAcceleratorResourcesFlag: P5 judges the extended resources --accelerator-resources
// names, and only those; a bad entry stops the webhook before it serves, naming it.
func TestAcceleratorResourcesFlag(t *testing.T) {
	kube := framework.C.Kube
	crt := newCerts(t)
	xpuPod := func() *corev1.Pod {
		return newPod("xpu-job", training("train-a100"), corev1.ResourceList{"vendor.example/xpu": resource.MustParse("2")})
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	t.Run("a bad entry stops the webhook and names it", func(t *testing.T) {
		proc, logs := launchWebhook(t, "--cert-mode=files", "--cert-dir="+crt.Dir, "--accelerator-resources=vendor.example/xpu,xpu")
		select {
		case <-proc.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("the webhook still runs with a bad --accelerator-resources:\n%s", logs.String())
		}
		assert.Contains(t, logs.String(), `--accelerator-resources: \"xpu\" is not an extended resource name (such as vendor.example/xpu): it has no vendor domain prefix`)
	})

	t.Run("a configured resource is judged by P5", func(t *testing.T) {
		proc, logs := launchWebhook(t, "--cert-mode=files", "--cert-dir="+crt.Dir, "--accelerator-resources=vendor.example/xpu")
		waitReady(t, proc, logs)
		registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
		require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))
		_, err := kube.CoreV1().Pods(ns).Create(ctx, xpuPod(), dryRun)
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P5] pod requests vendor.example/xpu but pool "train-a100" provides nvidia.com/gpu: request nvidia.com/gpu or use a pool of vendor.example/xpu nodes`), err.Error())
		proc.Kill()
	})

	t.Run("without the flag the resource is no accelerator", func(t *testing.T) {
		proc, _ := startWebhook(t, crt)
		registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
		// The API server picks the new address up asynchronously: until it does, the
		// killed webhook's registration fails the call (or its failure policy admits the
		// pod unjudged, unpinned). Judged by this webhook, the pod is admitted and pinned.
		var got *corev1.Pod
		var last error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			got, last = kube.CoreV1().Pods(ns).Create(ctx, xpuPod(), dryRun)
			return last == nil && got.Spec.NodeSelector[policy.LabelPool] == "train-a100", nil
		})
		require.NoError(t, err, "the pod was never admitted and pinned by the webhook: %v", last)
		assert.Equal(t, map[string]string{policy.LabelPool: "train-a100"}, got.Spec.NodeSelector)
	})
}
