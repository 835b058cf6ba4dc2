package gpuctl

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// The request sequences gpuctl's CLI sends (gpuctl/client/*_client.py at its newest
// commit), replayed byte for byte with client-go. gpuctl's Python client (kubernetes'
// rest.py) sends a dict body of patch_node as a strategic merge patch, json.dumps'd, one
// label per request: {"metadata": {"labels": {KEY: VALUE}}} (None removes). `gpuctl create -f pool.yaml`
// sends, per node in the file's order, the pool label and then the gpu-type label;
// `gpuctl label node NODE pool=P` sends the pool label alone; `gpuctl create -f
// quota.yaml` creates a ResourceQuota with hard {cpu, memory, nvidia.com/gpu}.

// labelNode is gpuctl's PoolClient._label_node.
func labelNode(node, key, value string) error {
	body := fmt.Sprintf(`{"metadata": {"labels": {%q: %q}}}`, key, value) // Python's json.dumps
	_, err := framework.C.Kube.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
	return err
}

// addNode adds a kwok GPU node (4 nvidia.com/gpu) with the given labels.
func addNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	q := resource.MustParse
	res := corev1.ResourceList{"cpu": q("32"), "memory": q("256Gi"), "pods": q("110"), "nvidia.com/gpu": q("4")}
	l := map[string]string{"kubernetes.io/hostname": name, "type": "kwok"}
	for k, v := range labels {
		l[k] = v
	}
	_, err := framework.C.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}, Labels: l},
		Status:     corev1.NodeStatus{Allocatable: res, Capacity: res},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func nodeLabels(t *testing.T, name string, keys ...string) []string {
	t.Helper()
	n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = n.Labels[k]
	}
	return out
}

func TestGpuctlRequestSequences(t *testing.T) {
	startWebhook(t)

	t.Run("create -f pool.yaml: two nodes of one model, in both label orders", func(t *testing.T) {
		for _, c := range []struct {
			pool     string
			product  string // GFD's nvidia.com/gpu.product; "" absent
			typeLast bool   // gpuctl's order: the pool label, then the gpu-type
		}{
			{"seq-gfd-pool", "NVIDIA-A10", true},
			{"seq-gfd-type", "NVIDIA-A10", false},
			{"seq-bare-pool", "", true},
			{"seq-bare-type", "", false},
		} {
			t.Run(c.pool, func(t *testing.T) {
				for i := 1; i <= 2; i++ {
					labels := map[string]string{}
					if c.product != "" {
						labels[policy.LabelNVIDIAProduct] = c.product
					}
					addNode(t, fmt.Sprintf("%s-%d", c.pool, i), labels)
				}
				for i := 1; i <= 2; i++ {
					node := fmt.Sprintf("%s-%d", c.pool, i)
					reqs := [][2]string{{"runwhere.ai/pool", c.pool}, {"runwhere.ai/gpu-type", "a10-24g"}}
					if !c.typeLast {
						reqs[0], reqs[1] = reqs[1], reqs[0]
					}
					for _, r := range reqs {
						require.NoError(t, labelNode(node, r[0], r[1]), "%s %s=%s", node, r[0], r[1])
					}
					assert.Equal(t, []string{c.pool, "a10-24g"}, nodeLabels(t, node, "runwhere.ai/pool", "runwhere.ai/gpu-type"))
				}
				// A node of another model is refused in the same order.
				other := c.pool + "-x"
				labels := map[string]string{}
				if c.product != "" {
					labels[policy.LabelNVIDIAProduct] = "NVIDIA-A100-SXM4-80GB"
				}
				addNode(t, other, labels)
				reqs := [][2]string{{"runwhere.ai/pool", c.pool}, {"runwhere.ai/gpu-type", "A100-80G"}}
				if !c.typeLast {
					reqs[0], reqs[1] = reqs[1], reqs[0]
				}
				var err error
				for _, r := range reqs {
					if err = labelNode(other, r[0], r[1]); err != nil {
						break
					}
				}
				require.Error(t, err)
				assert.Equal(t, []string{"N2"}, policy.RulesOfStatus(err))
				assert.Contains(t, err.Error(), `cannot join pool "`+c.pool+`": the pool takes only a10-24g nodes`)
			})
		}
	})

	t.Run("label node pool=P: a node of the pool's model joins, one of another model is refused", func(t *testing.T) {
		addNode(t, "seq-label-a10", map[string]string{policy.LabelNVIDIAProduct: "NVIDIA-A10"})
		addNode(t, "seq-label-a100", map[string]string{policy.LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB"})
		require.NoError(t, labelNode("seq-label-a10", "runwhere.ai/pool", "seq-gfd-pool"))
		// The pool's members are now labelled a10-24g (gpu-type) and NVIDIA-A10 (GFD only):
		// one model, named by the first of its names. The webhook judges by its informer
		// cache, which sees seq-label-a10 join a moment after the API server does; until
		// then the pool's model is named a10-24g alone. Every attempt is refused (N2);
		// once the cache has the new member the denial names the model by its first name.
		const want = `admission webhook "nodes.runwhere.ai" denied the request: [N2] node "seq-label-a100" (its device plugin reports nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB) cannot join pool "seq-gfd-pool": the pool takes only NVIDIA-A10 nodes; choose a node of model NVIDIA-A10 or a pool for NVIDIA-A100-SXM4-80GB nodes`
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			err := labelNode("seq-label-a100", "runwhere.ai/pool", "seq-gfd-pool")
			require.Error(t, err)
			require.Equal(t, []string{"N2"}, policy.RulesOfStatus(err), err.Error())
			if err.Error() == want || time.Now().After(deadline) {
				require.Equal(t, want, err.Error())
				break
			}
		}
		assert.Equal(t, []string{""}, nodeLabels(t, "seq-label-a100", "runwhere.ai/pool"))
	})

	t.Run("a gpuctl quota's ResourceQuota in get quota, with the warning", func(t *testing.T) {
		const ns = "seq-quota-team"
		kube := framework.C.Kube
		// gpuctl's ensure_namespace_exists, then create_namespaced_resource_quota.
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		body := `{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"labels": {"runwhere.ai/quota": "gpu-quota", "runwhere.ai/namespace": "` + ns + `"}, "name": "gpu-quota-` + ns + `", "namespace": "` + ns + `"}, "spec": {"hard": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}}`
		require.NoError(t, kube.CoreV1().RESTClient().Post().Namespace(ns).Resource("resourcequotas").
			SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error())
		// Quota admission charges a pod only to a quota whose status.hard the quota
		// controller has filled; a pod created before that is admitted uncharged, and the
		// controller's first count may miss it (its pod informer lags), leaving used at 0
		// until its five-minute resync. A user sees the quota take effect once status.hard
		// is set, so wait for that as they would.
		poll(t, "the quota's status.hard", func() (bool, error) {
			q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "gpu-quota-"+ns, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			_, filled := q.Status.Hard[corev1.ResourceCPU]
			return filled, nil
		})
		res := corev1.ResourceList{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("3Gi"), "nvidia.com/gpu": resource.MustParse("2")}
		_, err = kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		// The pod requests 2 GPUs, but Kubernetes neither counts nor enforces the bare
		// nvidia.com/gpu: status.used has no entry for it, shown as 0.
		want := "NAMESPACE        QUOTA       CPU       MEMORY     GPU\nseq-quota-team   gpu-quota   1500m/8   3Gi/16Gi   0/4\n"
		var last framework.Result
		err = wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(context.Context) (bool, error) {
			last = framework.C.Litepool(t, "get", "quota", "-n", ns)
			return last.ExitCode == 0 && strings.Contains(last.Stdout, "1500m/8"), nil
		})
		require.NoError(t, err, "waiting for the quota's use; the last get quota exited %d:\n%s%s", last.ExitCode, last.Stdout, last.Stderr)
		assert.Equal(t, want, last.Stdout)
		assert.Equal(t, "Warning: resourcequota seq-quota-team/gpu-quota-seq-quota-team: nvidia.com/gpu is not enforced by Kubernetes, which limits an extended resource only by its requests, so pods may use more than 4; set requests.nvidia.com/gpu instead\n", last.Stderr)
	})

	t.Run("a gpuctl job with gpuType lands on a node joined by scale --add", func(t *testing.T) {
		addNode(t, "seq-l4-1", map[string]string{policy.LabelNVIDIAProduct: "NVIDIA-L4"})
		mustLitepool(t, "create", "-f", writeFile(t, t.TempDir(), "l4.yaml", `apiVersion: runwhere.ai/v1alpha1
kind: Pool
metadata:
  name: seq-scale-add
spec:
  type: Training
  accelerator:
    type: L4-24G
`))
		assert.Equal(t, "node/seq-l4-1 added to pool seq-scale-add\npool.runwhere.ai/seq-scale-add scaled from 0 to 1 node(s)\n",
			mustLitepool(t, "scale", "seq-scale-add", "--add", "seq-l4-1"))
		assert.Equal(t, []string{"seq-scale-add", "L4-24G", "L4-24G"}, nodeLabels(t, "seq-l4-1", "runwhere.ai/pool", "runwhere.ai/gpu-type", "runwhere.ai/gpuType"))
		const ns = "seq-jobs"
		_, err := framework.C.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		if _, err := framework.C.Kube.SchedulingV1().PriorityClasses().Create(ctx, gpuctlPriorityClass(), metav1.CreateOptions{}); err != nil {
			require.True(t, apierrors.IsAlreadyExists(err), "%v", err)
		}
		j := gpuctlJob{Name: "seq-l4-train", Kind: "training", Pool: "seq-scale-add", GPUType: "L4-24G", GPUs: 1}
		_, err = framework.C.Kube.BatchV1().Jobs(ns).Create(ctx, j.trainingJob(ns), metav1.CreateOptions{})
		require.NoError(t, err)
		poll(t, "the job's pod on a node", func() (bool, error) {
			list, err := framework.C.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=seq-l4-train"})
			if err != nil || len(list.Items) != 1 {
				return false, err
			}
			return list.Items[0].Spec.NodeName != "", nil
		})
		list, err := framework.C.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=seq-l4-train"})
		require.NoError(t, err)
		assert.Equal(t, "seq-l4-1", list.Items[0].Spec.NodeName)
		assert.Equal(t, map[string]string{"runwhere.ai/pool": "seq-scale-add", "runwhere.ai/gpuType": "L4-24G"}, list.Items[0].Spec.NodeSelector)
	})

	t.Run("two concurrent scale --nodes 3 both succeed", func(t *testing.T) {
		for i := 1; i <= 3; i++ {
			addNode(t, fmt.Sprintf("seq-h20-%d", i), map[string]string{policy.LabelNVIDIAProduct: "NVIDIA-H20"})
		}
		mustLitepool(t, "create", "-f", writeFile(t, t.TempDir(), "h20.yaml", `kind: pool
version: v0.1
pool:
  name: seq-concurrent
nodes:
  seq-h20-1:
    gpuType: H20-96G
`))
		var wg sync.WaitGroup
		results := make([]framework.Result, 2)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = framework.C.Litepool(t, "scale", "seq-concurrent", "--nodes", "3")
			}()
		}
		wg.Wait()
		for _, r := range results {
			assert.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
			assert.Empty(t, r.Stderr)
		}
		list, err := framework.C.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "runwhere.ai/pool=seq-concurrent"})
		require.NoError(t, err)
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
			assert.Equal(t, "H20-96G", n.Labels["runwhere.ai/gpuType"], n.Name)
		}
		sort.Strings(names)
		assert.Equal(t, []string{"seq-h20-1", "seq-h20-2", "seq-h20-3"}, names)
		t.Logf("first:\n%ssecond:\n%s", results[0].Stdout, results[1].Stdout)
	})
}
