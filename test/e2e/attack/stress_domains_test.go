package attack

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Row of issue 41 item 3: a stress run by domain groups members by their topology
// labels, which any writer of node labels may rewrite.

// attackStressByDomainRelabel: the labeller moves a busy member of sp-a into sp-b, so
// that sp-a looks idle; an operator then starts a run by domain. The labels decide only
// the grouping: the busy node's new domain is skipped whole (naming it), its old one is
// tested without it, and no test pod is ever made on the busy node.
func attackStressByDomainRelabel(t *testing.T) {
	nodeWorkFixture(t)
	const pool = "at-sdom"
	topoPool(t, pool, map[string][]string{"sp-a": {"at-sdom-a1", "at-sdom-a2"}, "sp-b": {"at-sdom-b1", "at-sdom-b2"}})
	pod := gpuPod("at-sdom-job", "8")
	pod.Labels = map[string]string{policy.LabelPool: pool}
	pod.Spec.NodeName = "at-sdom-a1"
	_, err := framework.C.Kube.CoreV1().Pods(ownNS).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = as(t, nodePatcher).CoreV1().Nodes().Patch(ctx, "at-sdom-a1", types.MergePatchType, []byte(`{"metadata":{"labels":{"`+superPod+`":"sp-b"}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "topology labels are their agents': never refused")

	dyn, err := dynamic.NewForConfig(asConfig(litepoolOp))
	require.NoError(t, err)
	run := (&unstructuredRun{Name: "at-sdom-run", Pool: pool}).object()
	require.NoError(t, unstructured.SetNestedField(run.Object, true, "spec", "domains"))
	var lastErr error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		_, lastErr = dyn.Resource(v1alpha1.StressRunResource).Create(ctx, run, metav1.CreateOptions{})
		return lastErr == nil, nil // the webhook's cache sees the pool's topology a moment after it is made
	}), "litepool-operator creates a run by domain: %v", lastErr)
	t.Cleanup(func() {
		_, _ = dyn.Resource(v1alpha1.StressRunResource).Patch(context.Background(), "at-sdom-run", types.MergePatchType, []byte(`{"spec":{"abort":true}}`), metav1.PatchOptions{})
	})

	// The run's test pod on sp-a's idle member tells that the controller planned it.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		return len(nodeWorkPods(t, "at-sdom-a2")) > 0, nil
	}), "no stress pod on sp-a's idle member")
	var got v1alpha1.StressRun
	u, err := dyn.Resource(v1alpha1.StressRunResource).Get(ctx, "at-sdom-run", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got))
	require.Len(t, got.Status.Domains, 2, "%+v", got.Status)
	assert.Equal(t, []string{"at-sdom-a2"}, got.Status.Domains[0].Members, "sp-a is tested without the member moved out")
	assert.Equal(t, v1alpha1.StressDomainResult{Domain: "sp-b", Members: []string{"at-sdom-a1", "at-sdom-b1", "at-sdom-b2"}, Outcome: v1alpha1.StressOutcomeSkipped,
		Message: "not idle: at-sdom-a1 busy: 1 workload pod(s): " + ownNS + "/at-sdom-job"}, got.Status.Domains[1])
	for _, n := range []string{"at-sdom-a1", "at-sdom-b1", "at-sdom-b2"} {
		assert.Empty(t, nodeWorkPods(t, n), "no test pod on %s", n)
	}
	for _, r := range got.Status.Results {
		if r.Node == "at-sdom-a1" {
			assert.True(t, strings.HasPrefix(r.Message, "domain sp-b not idle: at-sdom-a1 busy"), r.Message)
		}
	}
}
