package pools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// The fixture (hack/fixtures): train-a100 has 3 A100 nodes (8 GPUs each) with pods using
// 8 + 4; infer-a10 has 2 A10 nodes (4 each, one cordoned: not free) with a pod using 2;
// train-snt9b has 3 Snt9B nodes (8 NPUs each, one NotReady: 24 in total, its 8 not free) with a pod
// using 8; dev-sandbox is a Pool object with no nodes; default holds a100-node-4 and two
// CPU nodes.
const fixturePools = `POOL NAME     STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
dev-sandbox   Empty      0           0          0          0
infer-a10     Degraded   8           2          2          2
train-a100    Running    24          12         12         3
train-snt9b   Degraded   24          8          8          3
default       Running    8           0          8          3
`

func TestGetPoolsThroughKubectlPluginDiscovery(t *testing.T) {
	out := framework.C.MustLitepool(t, "get", "pools")
	assert.Equal(t, fixturePools, out)
}

func TestGetPoolsHonoursKubeconfigAndContext(t *testing.T) {
	// --context names the kubeconfig's only context explicitly; a wrong one must fail.
	ctxName := currentContext(t)
	// KUBECONFIG points nowhere: only the flag can find the cluster.
	r := framework.C.KubectlEnv(t, []string{"KUBECONFIG=/nonexistent"}, "",
		"litepool", "--kubeconfig", framework.C.Kubeconfig, "--context", ctxName, "get", "pools", "train-a100", "--no-headers")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "train-a100   Running   24    12    12    3\n", r.Stdout)

	r = framework.C.Litepool(t, "--context", "no-such-context", "get", "pools")
	assert.NotEqual(t, 0, r.ExitCode)
	assert.Contains(t, r.Stderr, `context "no-such-context" does not exist`)
}

func TestGetPoolsWide(t *testing.T) {
	// Named pools come back in the usual order (by name), not the order asked.
	out := framework.C.MustLitepool(t, "get", "pools", "train-a100", "infer-a10", "-o", "wide")
	assert.Equal(t, `POOL NAME    STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT   TYPE               ACCELERATOR   RESOURCE         HEALTHY   FAULTY   DRIVER VERSIONS
infer-a10    Degraded   8           2          2          2            <no pool object>   A10-24G       nvidia.com/gpu   1         1        550.54.15
train-a100   Running    24          12         12         3            Training           A100-80G      nvidia.com/gpu   3         0        535.104.05
`, out)
}

func TestGetPoolJSONCarriesComputedStatus(t *testing.T) {
	out := framework.C.MustLitepool(t, "get", "pool", "train-snt9b", "-o", "json")
	var pool struct {
		Kind   string
		Spec   struct{ MinNodes int32 }
		Status struct {
			Phase                                              string
			NodeCount, HealthyNodes, FaultyNodes               int32
			AcceleratorResource                                string
			AcceleratorTotal, AcceleratorUsed, AcceleratorFree int64
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &pool))
	assert.Equal(t, "Pool", pool.Kind)
	assert.Equal(t, "Degraded", pool.Status.Phase)
	assert.Equal(t, "huawei.com/Ascend910", pool.Status.AcceleratorResource)
	assert.Equal(t, []int64{24, 8, 8}, []int64{pool.Status.AcceleratorTotal, pool.Status.AcceleratorUsed, pool.Status.AcceleratorFree})
	assert.Equal(t, []int32{3, 2, 1}, []int32{pool.Status.NodeCount, pool.Status.HealthyNodes, pool.Status.FaultyNodes})
}

func TestGetPoolsUnknownPool(t *testing.T) {
	r := framework.C.Litepool(t, "get", "pools", "no-such-pool")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"no-such-pool\" not found\n", r.Stderr)
	assert.Empty(t, r.Stdout)
}

func TestFinishedPodsFreeTheirAccelerators(t *testing.T) {
	ctx := context.Background()
	kube := framework.C.Kube
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "finished-job", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "a100-node-4", Containers: []corev1.Container{{
			Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
		}}},
	}
	_, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		zero := int64(0)
		_ = kube.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	assert.Equal(t, "default   Running   8     8     0     3\n", framework.C.MustLitepool(t, "get", "pools", "default", "--no-headers"))

	// Once the pod has Succeeded, its GPUs are free again.
	err = wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodSucceeded {
			return true, nil
		}
		p.Status.Phase = corev1.PodSucceeded
		if _, err := kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return false, err // a conflict (kwok updated the pod) is retried on the next poll
		}
		return false, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "default   Running   8     0     8     3\n", framework.C.MustLitepool(t, "get", "pools", "default", "--no-headers"))
}

func currentContext(t *testing.T) string {
	t.Helper()
	r := framework.C.Kubectl(t, "", "config", "current-context")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	return r.Stdout[:len(r.Stdout)-1]
}
