package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-webhook") }

const ns = "ai-team"

var ctx = context.Background()

func denied(hook, msg string) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", hook, msg)
}

func newPod(name string, labels map[string]string, res corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: res}}}},
	}
}

func training(pool string) map[string]string {
	return map[string]string{policy.LabelPool: pool, policy.LabelWorkloadType: "training"}
}

func createPod(kube kubernetes.Interface, namespace string, p *corev1.Pod) (*corev1.Pod, error) {
	return kube.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
}

func mergePatch(t *testing.T, obj map[string]any) []byte {
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return b
}

func labelNode(kube kubernetes.Interface, t *testing.T, node string, labels map[string]any) error {
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		mergePatch(t, map[string]any{"metadata": map[string]any{"labels": labels}}), metav1.PatchOptions{})
	return err
}

func labelNodeStatus(kube kubernetes.Interface, t *testing.T, node string, labels map[string]any) error {
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		mergePatch(t, map[string]any{"metadata": map[string]any{"labels": labels}}), metav1.PatchOptions{}, "status")
	return err
}

// TestDeployServerDryRun: the control plane accepts the kustomize base as shipped.
func TestDeployServerDryRun(t *testing.T) {
	c := framework.C
	// A server-side dry run cannot create the namespace the rest goes into.
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "litepool-system"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	r := c.Kubectl(t, "", "apply", "--dry-run=server", "-k", filepath.Join(framework.Root, "deploy", "webhook"))
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/pools.runwhere.ai",
		"deployment.apps/litepool-webhook created (server dry run)",
		"poddisruptionbudget.policy/litepool-webhook created (server dry run)",
		"mutatingwebhookconfiguration.admissionregistration.k8s.io/litepool-webhook created (server dry run)",
		"validatingwebhookconfiguration.admissionregistration.k8s.io/litepool-webhook created (server dry run)",
		"clusterrole.rbac.authorization.k8s.io/litepool-webhook created (server dry run)",
	} {
		assert.Contains(t, r.Stdout, want)
	}
}

// TestCertManagerComponent: a user's kustomization of the base plus the cert-manager
// component renders cert-manager's Issuer and Certificate, the CA-injection
// annotations, the webhook in --cert-mode=files, and no empty Secret of its own.
func TestCertManagerComponent(t *testing.T) {
	rendered := framework.RenderWithComponent(t, "cert-manager")
	for _, want := range []string{"kind: Issuer", "kind: Certificate", "secretName: litepool-webhook-cert", "- --cert-mode=files",
		"cert-manager.io/inject-ca-from: litepool-system/litepool-ca"} {
		assert.Contains(t, rendered, want)
	}
	assert.NotContains(t, rendered, "kind: Secret")
	assert.Equal(t, 2, strings.Count(rendered, "cert-manager.io/inject-ca-from"), "both webhook configurations")
}

// deleteTestPods deletes every pod but the fixture's and waits until they are gone.
func deleteTestPods(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	fixture := map[string]bool{"llama-train-0": true, "llama-train-1": true, "qwen-infer": true, "pangu-train": true}
	remaining := func() int {
		n := 0
		for _, namespace := range []string{ns, "nb-team"} {
			list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, p := range list.Items {
				if !fixture[p.Name] {
					n++
					_ = kube.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
			}
		}
		return n
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return remaining() == 0, nil
	}), "test pods were not deleted")
}

// TestWebhook runs the webhook binary, registers deploy/webhook's configurations with
// the real API server by URL, walks every rule's allow and deny path, rotates the
// certificate, then kills the webhook and shows what each failure policy does.
func TestWebhook(t *testing.T) {
	c := framework.C
	kube := c.Kube
	pools := poolclient.New(c.Dynamic)
	crt := newCerts(t)
	proc, logs := startWebhook(t, crt)
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)

	// The API server picks the configurations up asynchronously: wait until a pod that
	// names a missing pool is refused.
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))

	// Pools the fixture lacks: an NPU pool without HCCL retry, and an exclusive
	// development pool limited to one namespace that names it as its default.
	_, err := pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "npu-noretry"}, Spec: v1alpha1.PoolSpec{
		Type: v1alpha1.PoolTypeTraining, Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "dev-exclusive"}, Spec: v1alpha1.PoolSpec{
		Type: v1alpha1.PoolTypeDevelopment, Exclusive: true, Namespaces: []string{"nb-team"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nb-team",
		Labels: map[string]string{policy.LabelPool: "dev-exclusive"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	npu := corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8")}
	wantHCCL := []corev1.EnvVar{{Name: "HCCL_OP_RETRY_ENABLE", Value: "L0:0, L1:1, L2:1"}, {Name: "HCCL_OP_RETRY_PARAMS", Value: "MaxCnt:3,HoldTime:60000,IntervalTime:1000"}}

	t.Run("P1 pins pool pods and gives NPU pods of a retry pool the HCCL env", func(t *testing.T) {
		got, err := createPod(kube, ns, newPod("pangu-1", training("train-snt9b"), npu))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{policy.LabelPool: "train-snt9b"}, got.Spec.NodeSelector)
		assert.Equal(t, wantHCCL, got.Spec.Containers[0].Env)

		got, err = createPod(kube, ns, newPod("npu-plain", training("npu-noretry"), npu))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{policy.LabelPool: "npu-noretry"}, got.Spec.NodeSelector)
		assert.Empty(t, got.Spec.Containers[0].Env, "a pool without HCCL retry injects no HCCL env")
	})
	t.Run("P1 HCCL env follows `kubectl litepool hccl set`", func(t *testing.T) {
		// The operator turns retry on for npu-noretry with the plugin; the webhook's cache
		// sees the Pool change and new NPU pods of that pool get the env.
		framework.C.MustLitepool(t, "hccl", "set", "npu-noretry", "--op-retry=true", "--max-retries", "5", "--retry-timeout", "100s")
		t.Cleanup(func() { framework.C.MustLitepool(t, "hccl", "set", "npu-noretry", "--op-retry=false") })
		want := []corev1.EnvVar{{Name: "HCCL_OP_RETRY_ENABLE", Value: "L0:0, L1:1, L2:1"}, {Name: "HCCL_OP_RETRY_PARAMS", Value: "MaxCnt:5,HoldTime:20000,IntervalTime:1000"}}
		var env []corev1.EnvVar
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := kube.CoreV1().Pods(ns).Create(ctx, newPod("npu-retry-on", training("npu-noretry"), npu), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return false, err
			}
			env = got.Spec.Containers[0].Env
			return len(env) > 0, nil
		})
		require.NoError(t, err, "the webhook never injected the HCCL env after hccl set")
		assert.Equal(t, want, env)
	})
	t.Run("P1 exclusive pool toleration and namespace default pool", func(t *testing.T) {
		got, err := createPod(kube, "nb-team", newPod("notebook", map[string]string{policy.LabelWorkloadType: "development"}, nil))
		require.NoError(t, err)
		assert.Equal(t, "dev-exclusive", got.Labels[policy.LabelPool])
		assert.Equal(t, map[string]string{policy.LabelPool: "dev-exclusive"}, got.Spec.NodeSelector)
		assert.Contains(t, got.Spec.Tolerations, policy.ExclusivePoolToleration("dev-exclusive"))
	})
	t.Run("P1 conflict denied, nothing overwritten", func(t *testing.T) {
		p := newPod("conflict", training("train-a100"), nil)
		p.Spec.NodeSelector = map[string]string{policy.LabelPool: "infer-a10"}
		_, err := createPod(kube, ns, p)
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P1] nodeSelector runwhere.ai/pool=infer-a10 conflicts with pool "train-a100", which needs runwhere.ai/pool=train-a100: remove it or make it runwhere.ai/pool=train-a100 (litepool never overwrites it)`), err.Error())
		assert.True(t, apierrors.IsForbidden(err))

		p = newPod("hccl-conflict", training("train-snt9b"), npu)
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HCCL_OP_RETRY_PARAMS", Value: "MaxCnt:9"}}
		_, err = createPod(kube, ns, p)
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P1] container "main" sets HCCL_OP_RETRY_PARAMS="MaxCnt:9" but pool "train-snt9b" sets "MaxCnt:3,HoldTime:60000,IntervalTime:1000": remove it from the container (the pool's value is injected) or change the pool's HCCL settings`), err.Error())
	})
	t.Run("P1 dry run answers the same and stores nothing", func(t *testing.T) {
		got, err := kube.CoreV1().Pods(ns).Create(ctx, newPod("dry", training("train-a100"), nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{policy.LabelPool: "train-a100"}, got.Spec.NodeSelector)
		_, err = kube.CoreV1().Pods(ns).Get(ctx, "dry", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "a dry-run pod is not stored: %v", err)
	})
	t.Run("P2 unknown pool denied with the pools that exist", func(t *testing.T) {
		_, err := createPod(kube, ns, newPod("h100", training("train-h100"), nil))
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P2] pool "train-h100" (label runwhere.ai/pool) does not exist: ask for a pool that exists (kubectl litepool get pools) or remove the label`), err.Error())
		_, err = createPod(kube, ns, newPod("a10", map[string]string{policy.LabelPool: "infer-a10"}, nil))
		assert.NoError(t, err, "a pool made of node labels exists")
	})
	t.Run("P3 cross-type work denied", func(t *testing.T) {
		_, err := createPod(kube, ns, newPod("serve", map[string]string{policy.LabelPool: "train-a100", policy.LabelWorkloadType: "inference"}, nil))
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P3] pool "train-a100" (type Training) does not accept inference work (label runwhere.ai/workload-type): it accepts training, development; use a pool that takes inference work`), err.Error())
		_, err = createPod(kube, ns, newPod("notebook-a100", map[string]string{policy.LabelPool: "train-a100", policy.LabelWorkloadType: "development"}, nil))
		assert.NoError(t, err)
	})
	t.Run("P4 namespace not allowed", func(t *testing.T) {
		_, err := createPod(kube, ns, newPod("nb", map[string]string{policy.LabelPool: "dev-exclusive", policy.LabelWorkloadType: "development"}, nil))
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P4] namespace "ai-team" may not use pool "dev-exclusive": the pool admits only the namespaces its spec.namespaces lists or its spec.namespaceSelector selects, and "ai-team" is not among them; use a pool that admits it, or have "ai-team" added to spec.namespaces of pool "dev-exclusive"`), err.Error())
	})
	t.Run("P5 accelerator mismatch denied", func(t *testing.T) {
		p := newPod("wrong-gpu", training("train-a100"), nil)
		p.Spec.NodeSelector = map[string]string{policy.LabelGPUType: "A10-24G"}
		_, err := createPod(kube, ns, p)
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P5] nodeSelector runwhere.ai/gpu-type=A10-24G does not match pool "train-a100", whose nodes are runwhere.ai/gpu-type=A100-80G: ask for runwhere.ai/gpu-type=A100-80G or use a pool of the gpu-type you need`), err.Error())
		p.Spec.NodeSelector = map[string]string{policy.LabelGPUType: "A100-80G"}
		p.Name = "right-gpu"
		_, err = createPod(kube, ns, p)
		assert.NoError(t, err)
	})
	t.Run("pods outside pools are not sent to the webhook", func(t *testing.T) {
		before := proc.decisions(t, "pods")
		got, err := createPod(kube, ns, newPod("plain", nil, nil))
		require.NoError(t, err)
		assert.Empty(t, got.Spec.NodeSelector)
		assert.Equal(t, before, proc.decisions(t, "pods"), "objectSelector keeps pods without a pool off the wire")
	})

	// The pods above were scheduled onto pool nodes; the node and pool rules below
	// count workload pods, so only the fixture's pods stay.
	deleteTestPods(t, kube)

	t.Run("N1 unknown and look-alike keys denied (kubectl)", func(t *testing.T) {
		r := c.Kubectl(t, "", "label", "node", "cpu-node-1", "pool=train-a100")
		assert.Equal(t, 1, r.ExitCode)
		assert.Equal(t, "Error from server (Forbidden): "+denied("nodes.runwhere.ai", `[N1] label key "pool" looks like litepool's "runwhere.ai/pool": use "runwhere.ai/pool" (node "cpu-node-1")`)+"\n", r.Stderr)
		r = c.Kubectl(t, "", "label", "node", "cpu-node-1", "runwhere.ai/zone=a")
		assert.Contains(t, r.Stderr, `[N1] unknown label key "runwhere.ai/zone": keys under "runwhere.ai/" must be one of runwhere.ai/driver-version, runwhere.ai/gpu-type, runwhere.ai/gpuType, runwhere.ai/health, runwhere.ai/job-type, runwhere.ai/namespace, runwhere.ai/node-pool, runwhere.ai/pool, runwhere.ai/port, runwhere.ai/priority, runwhere.ai/quota, runwhere.ai/workload-type (node "cpu-node-1")`)
		r = c.Kubectl(t, "", "label", "node", "cpu-node-1", "runwhere.ai/health=healthy")
		assert.Equal(t, 0, r.ExitCode, r.Stderr)
	})
	t.Run("N2 cross-type join denied, matching join allowed", func(t *testing.T) {
		err := labelNode(kube, t, "a100-node-4", map[string]any{policy.LabelPool: "train-snt9b"})
		require.Error(t, err)
		assert.Equal(t, denied("nodes.runwhere.ai", `[N2] node "a100-node-4" (gpu-type A100-80G) cannot join pool "train-snt9b": the pool takes only Snt9B nodes; choose a node labelled runwhere.ai/gpu-type=Snt9B or a pool for A100-80G nodes`), err.Error())
		require.NoError(t, labelNode(kube, t, "a100-node-4", map[string]any{policy.LabelPool: "train-a100"}))
	})
	t.Run("N3 unsafe leave and delete denied; forced leave audited", func(t *testing.T) {
		busy := `[N3] node "a100-node-1" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-0); drain it first (kubectl litepool drain a100-node-1) or wait for them to finish`
		err := labelNode(kube, t, "a100-node-1", map[string]any{policy.LabelPool: nil})
		require.Error(t, err)
		assert.Equal(t, denied("node-departures.runwhere.ai", busy), err.Error())

		w := &framework.Warnings{}
		wkube := framework.WarningClient(t, w)
		_, err = wkube.CoreV1().Nodes().Patch(ctx, "a100-node-1", types.MergePatchType, mergePatch(t, map[string]any{"metadata": map[string]any{
			"labels": map[string]any{policy.LabelPool: nil}, "annotations": map[string]any{policy.AnnotationForce: "e2e-operator: testing the override"}}}), metav1.PatchOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{`[N3] forced by e2e-operator (testing the override) through runwhere.ai/force; overridden: ` + strings.TrimPrefix(busy, "[N3] ") +
			`; remove the annotation when done (kubectl annotate node a100-node-1 runwhere.ai/force-)`}, w.Take())
		assert.Contains(t, logs.String(), `"msg":"rule N3 overridden by runwhere.ai/force"`)
		assert.Contains(t, logs.String(), `"forcedBy":"e2e-operator"`)

		// train-a100 (minNodes 2) now has a100-node-2, -3 and -4: one more may go.
		require.NoError(t, labelNode(kube, t, "a100-node-3", map[string]any{policy.LabelPool: nil}))
		// The webhook answers from its informer cache: wait (with dry runs, which change
		// nothing) until the cache has seen a100-node-3 leave before the real attempt.
		leave := mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{policy.LabelPool: nil}}})
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, dryErr := kube.CoreV1().Nodes().Patch(ctx, "a100-node-4", types.MergePatchType, leave, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return dryErr != nil, nil
		})
		err = labelNode(kube, t, "a100-node-4", map[string]any{policy.LabelPool: nil})
		require.Error(t, err)
		assert.Equal(t, denied("node-departures.runwhere.ai", `[N3] node "a100-node-4" cannot leave pool "train-a100": the pool would have 1 Ready node(s), below its minNodes 2; lower spec.minNodes first or add a node (a NotReady member may leave)`), err.Error())

		err = kube.CoreV1().Nodes().Delete(ctx, "a100-node-2", metav1.DeleteOptions{})
		require.Error(t, err)
		assert.Equal(t, denied("node-departures.runwhere.ai", `[N3] node "a100-node-2" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-1); drain it first (kubectl litepool drain a100-node-2) or wait for them to finish`), err.Error())
		assert.Equal(t, []string{"N3"}, policy.RulesOfStatus(err), "the rule id travels in the status causes, through the real API server")
		require.NoError(t, kube.CoreV1().Nodes().Delete(ctx, "snt9b-node-3", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}), "an idle member of a pool above its floor may go")
	})
	t.Run("N3 judges a pool label removed through nodes/status", func(t *testing.T) {
		_, err := kube.CoreV1().Nodes().Patch(ctx, "a100-node-4", types.MergePatchType,
			mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{policy.LabelPool: nil}}}), metav1.PatchOptions{}, "status")
		require.Error(t, err)
		assert.Equal(t, denied("node-departures.runwhere.ai", `[N3] node "a100-node-4" cannot leave pool "train-a100": the pool would have 1 Ready node(s), below its minNodes 2; lower spec.minNodes first or add a node (a NotReady member may leave)`), err.Error())
		err = labelNodeStatus(kube, t, "cpu-node-1", map[string]any{"runwhere.ai/zone": "a"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `denied the request: [N1] unknown label key "runwhere.ai/zone"`)
		node, err := kube.CoreV1().Nodes().Get(ctx, "a100-node-4", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "train-a100", node.Labels[policy.LabelPool], "the label stayed")
	})
	t.Run("N3 does not count terminating pods", func(t *testing.T) {
		// A pod that never finishes terminating (a finalizer here; a dead machine's
		// kubelet in real life) must not keep its node's Node object forever.
		p := newPod("stuck", nil, nil)
		p.Spec.NodeName, p.Finalizers = "snt9b-node-3", []string{"e2e.runwhere.ai/hold"}
		_, err := createPod(kube, ns, p)
		require.NoError(t, err)
		release := func() {
			_, _ = kube.CoreV1().Pods(ns).Patch(ctx, "stuck", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
		t.Cleanup(release)
		dryDelete := func() error {
			return kube.CoreV1().Nodes().Delete(ctx, "snt9b-node-3", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			err := dryDelete()
			return err != nil && strings.Contains(err.Error(), "ai-team/stuck"), nil
		}), "the running pod holds the node")
		require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctx, "stuck", metav1.DeleteOptions{}))
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return dryDelete() == nil, nil
		}), "a terminating pod no longer holds the node: %v", dryDelete())
		release()
	})
	t.Run("node heartbeats and unrelated updates never reach the webhook", func(t *testing.T) {
		before := proc.decisions(t, "nodes")
		node, err := kube.CoreV1().Nodes().Get(ctx, "a100-node-2", metav1.GetOptions{})
		require.NoError(t, err)
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: "LitepoolE2E", Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()})
		_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, labelNode(kube, t, "a100-node-2", map[string]any{"team": "e2e"}))
		assert.Equal(t, before, proc.decisions(t, "nodes"), "matchConditions keep these off the wire")
	})

	t.Run("R1 accelerator type immutable while the pool has nodes", func(t *testing.T) {
		_, err := pools.Patch(ctx, "train-a100", types.MergePatchType, []byte(`{"spec":{"accelerator":{"type":"H100-80G"}}}`), metav1.PatchOptions{})
		require.Error(t, err)
		assert.Equal(t, denied("pools.runwhere.ai", `[R1] accelerator type of pool "train-a100" cannot change from "A100-80G" to "H100-80G" while it has 2 node(s); remove its nodes first`), err.Error())
		_, err = pools.Patch(ctx, "train-a100", types.MergePatchType, []byte(`{"spec":{"description":"edited by e2e"}}`), metav1.PatchOptions{})
		assert.NoError(t, err)
		_, err = pools.Patch(ctx, "dev-sandbox", types.MergePatchType, []byte(`{"spec":{"accelerator":{"type":"L40S"}}}`), metav1.PatchOptions{})
		assert.NoError(t, err, "an empty pool may change its accelerator")
	})
	t.Run("R1 a new Pool adopts only label-only members of its accelerator type", func(t *testing.T) {
		p := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "infer-a10"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeInference,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}}
		_, err := pools.Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err)
		assert.Equal(t, denied("pools.runwhere.ai", `[R1] pool "infer-a10" with accelerator type "A100-80G" cannot adopt the 2 node(s) labelled runwhere.ai/pool=infer-a10 whose gpu-type differs: a10-node-1 (gpu-type A10-24G), a10-node-2 (gpu-type A10-24G); set spec.accelerator.type to their gpu-type, or take those nodes out of the pool first`), err.Error())
		p.Spec.Accelerator.Type = "A10-24G"
		_, err = pools.Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.NoError(t, err)
	})
	t.Run("R2 delete with running pods denied unless confirmed", func(t *testing.T) {
		err := pools.Delete(ctx, "train-snt9b", metav1.DeleteOptions{})
		require.Error(t, err)
		assert.Equal(t, denied("pools.runwhere.ai", `[R2] pool "train-snt9b" cannot be deleted: 1 workload pod(s) run on its nodes (ai-team/pangu-train); wait for them to finish, or confirm with the annotation runwhere.ai/confirm-delete=train-snt9b (kubectl litepool delete pool train-snt9b --force), which leaves the pods running`), err.Error())
		_, err = pools.Patch(ctx, "train-snt9b", types.MergePatchType, []byte(`{"metadata":{"annotations":{"runwhere.ai/confirm-delete":"train-snt9b"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		require.NoError(t, pools.Delete(ctx, "train-snt9b", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}))
		_, err = pools.Get(ctx, "train-snt9b")
		assert.NoError(t, err, "the dry-run delete left the pool")
	})

	t.Run("certificate rotation is picked up without a restart", func(t *testing.T) {
		serial, err := crt.ServedSerial(proc.Addr)
		require.NoError(t, err)
		require.Equal(t, int64(localwebhook.FirstSerial), serial)
		require.NoError(t, crt.Issue(101))
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			s, err := crt.ServedSerial(proc.Addr)
			return err == nil && s == 101, nil
		}), "the webhook kept serving the old certificate")
		_, err = createPod(kube, ns, newPod("after-rotation", training("train-a100"), nil))
		assert.NoError(t, err, "the API server still trusts the rotated certificate")
	})

	t.Run("webhook down: each failure policy as documented", func(t *testing.T) {
		proc.Kill()
		// Ignore (nodes): node status, litepool labels and pool-member deletes go through.
		node, err := kube.CoreV1().Nodes().Get(ctx, "a100-node-2", metav1.GetOptions{})
		require.NoError(t, err)
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: "LitepoolE2EDown", Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()})
		_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		assert.NoError(t, err, "node status never depends on the webhook")
		assert.NoError(t, labelNode(kube, t, "cpu-node-2", map[string]any{policy.LabelHealth: "healthy"}), "node webhook fails open")
		// Fail (departures from a pool): refused rather than let through unreserved.
		err = labelNode(kube, t, "snt9b-node-3", map[string]any{policy.LabelPool: nil})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `failed calling webhook "node-departures.runwhere.ai"`)
		// Pods outside pools never reach the webhook.
		_, err = createPod(kube, ns, newPod("plain-down", nil, nil))
		assert.NoError(t, err, "pods outside pools do not depend on the webhook")
		_, err = createPod(kube, ns, newPod("default-down", map[string]string{policy.LabelPool: "default"}, nil))
		assert.NoError(t, err, "pods of the default pool do not depend on the webhook")
		// Fail (pool pods, pools): refused rather than admitted unpinned.
		_, err = createPod(kube, ns, newPod("pool-down", training("train-a100"), nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), `failed calling webhook "pods.runwhere.ai"`)
		_, err = createPod(kube, "nb-team", newPod("nb-down", map[string]string{policy.LabelWorkloadType: "development"}, nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), `failed calling webhook "pods-namespace-default.runwhere.ai"`)
		_, err = pools.Patch(ctx, "train-a100", types.MergePatchType, []byte(`{"spec":{"description":"webhook down"}}`), metav1.PatchOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `failed calling webhook "pools.runwhere.ai"`)
		// kube-system is excluded even for pool pods.
		_, err = createPod(kube, "kube-system", newPod("system-down", training("train-a100"), nil))
		assert.NoError(t, err, "kube-system never depends on the webhook")
	})
}

// TestSelfManagedCertificate runs the default --cert-mode=self: the webhook issues its CA
// and serving certificate into its Secret and patches the CA bundle into both webhook
// configurations; it reports ready only once the certificate is on disk (kubelet's job
// in a cluster, done here by the test) and the API server then trusts it.
func TestSelfManagedCertificate(t *testing.T) {
	kube := framework.C.Kube
	const namespace, secretName = "litepool-system", "litepool-webhook-cert"
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = kube.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName}}, metav1.CreateOptions{})
	require.NoError(t, err)

	certDir := t.TempDir()
	proc, logs := launchWebhook(t, "--cert-mode=self", "--namespace="+namespace, "--cert-dir="+certDir, "--extra-dns-names=localhost")
	port := proc.Addr[strings.LastIndex(proc.Addr, ":")+1:]
	registerWebhooks(t, kube, "localhost:"+port, nil)

	var secret *corev1.Secret
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		secret, err = kube.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
		return err == nil && len(secret.Data["tls.crt"]) > 0, nil
	}), "the webhook never wrote its certificate:\n%s", logs.String())
	code, body := get("http://" + proc.Probe + "/readyz")
	assert.Equal(t, http.StatusInternalServerError, code, "not ready before the certificate is on disk: %s", body)

	for _, name := range []string{"tls.crt", "tls.key"} { // what kubelet does with the mounted Secret
		require.NoError(t, os.WriteFile(filepath.Join(certDir, name), secret.Data[name], 0o600))
	}
	waitReady(t, proc, logs)

	mut, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	val, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	for _, cc := range []admissionregistrationv1.WebhookClientConfig{mut.Webhooks[0].ClientConfig, mut.Webhooks[1].ClientConfig, val.Webhooks[0].ClientConfig, val.Webhooks[1].ClientConfig, val.Webhooks[2].ClientConfig, val.Webhooks[3].ClientConfig} {
		assert.Equal(t, string(secret.Data["ca.crt"]), string(cc.CABundle), "CA bundle injected")
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, err := kube.CoreV1().Pods(ns).Create(ctx, newPod("selfcert", training("train-a100"), nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.NodeSelector[policy.LabelPool] == "train-a100", nil
	}), "the API server never called the webhook through the injected CA bundle")
}
