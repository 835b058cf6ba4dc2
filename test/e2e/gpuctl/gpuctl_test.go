// Package gpuctl checks that what gpuctl makes works under litepool with the webhook
// running: gpuctl's pool files (every shape gpuctl reads), its quota files, and its
// workloads as its builders shape them, one per kind.
package gpuctl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-gpuctl") }

const (
	team         = "gpuctl-team"
	pollInterval = 250 * time.Millisecond
	pollTimeout  = 60 * time.Second
)

var ctx = context.Background()

// startWebhook runs the built webhook under the cluster (framework.StartWebhook, the
// same harness the plugin's e2e tests use) until the test ends.
func startWebhook(t *testing.T) {
	t.Helper()
	w, err := framework.StartWebhook(framework.C)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(w.Log)
			t.Logf("webhook log:\n%s", log)
		}
		w.Stop()
	})
}

// addGPUNode adds a kwok node whose device plugin reports product with gpus GPUs.
func addGPUNode(t *testing.T, name, product string, gpus int64) {
	t.Helper()
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	res := corev1.ResourceList{"cpu": q("32"), "memory": q("256Gi"), "pods": q("110"), "nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "type": "kwok", "nvidia.com/gpu.product": product}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res},
	}
	_, err := framework.C.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	require.NoError(t, err)
	poll(t, "node "+name+" Ready", func() (bool, error) {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

func poll(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(context.Context) (bool, error) { return cond() })
	require.NoError(t, err, "waiting for %s", what)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func mustLitepool(t *testing.T, args ...string) string {
	t.Helper()
	return framework.C.MustLitepool(t, args...)
}

// gpuctl's pool files, one per shape gpuctl reads: its code's (gpuctl/api/pool.py: nodes
// at the top level, gpuType), kind resource with gpu_type, and its guide's (nodes under
// pool, gpu-type).
const (
	trainingPoolFile = `kind: pool
version: v0.1
pool:
  name: training-pool
  description: "LLM training (high-end GPUs)"
nodes:
  a100-node-4:
    gpuType: A100-80G
`
	devPoolFile = `kind: resource
version: v0.1
pool:
  name: dev-pool
  description: "Notebook development"
nodes:
  gpu-node-5:
    gpu_type: RTX4090-24G
`
	inferencePoolFile = `kind: pool
version: v0.1
pool:
  name: inference-pool
  description: "Model serving"
  nodes:
    gpu-node-6:
      gpu-type: A10-24G
`
	computePoolFile = `kind: pool
version: v0.1
pool:
  name: compute-pool
  description: "CPU compute (no GPU)"
  nodes:
    cpu-node-1:
      gpu-type: ""
`
	// gpu-node-5 is an RTX 4090: this file would mislabel it.
	wrongTypeFile = `kind: pool
version: v0.1
pool:
  name: wrong-pool
nodes:
  gpu-node-5:
    gpuType: A100-80G
`
	quotaFile = `kind: quota
version: v0.1
quota:
  name: team-quota
  description: "gpuctl team limits"
namespace:
  gpuctl-team:
    cpu: 8
    memory: 16Gi
    gpu: 4
`
)

func TestGpuctlInterop(t *testing.T) {
	kube := framework.C.Kube
	startWebhook(t)
	addGPUNode(t, "gpu-node-5", "NVIDIA-GeForce-RTX-4090", 4)
	addGPUNode(t, "gpu-node-6", "NVIDIA-A10", 4)
	dir := t.TempDir()

	t.Run("a gpu-type contradicting the device plugin is refused and nothing changes", func(t *testing.T) {
		r := framework.C.Litepool(t, "create", "-f", writeFile(t, dir, "wrong.yaml", wrongTypeFile))
		assert.NotEqual(t, 0, r.ExitCode)
		assert.Contains(t, r.Stderr, `[N2] node "gpu-node-5": the pool file declares gpu-type "A100-80G" but its device plugin reports nvidia.com/gpu.product=NVIDIA-GeForce-RTX-4090: declare the model the node has, or leave the node out`)
		n, err := kube.CoreV1().Nodes().Get(ctx, "gpu-node-5", metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, n.Labels, "runwhere.ai/pool")
		assert.NotContains(t, n.Labels, "runwhere.ai/gpu-type")
	})

	t.Run("gpuctl pool files in every shape gpuctl reads", func(t *testing.T) {
		out := mustLitepool(t, "create",
			"-f", writeFile(t, dir, "training-pool.yaml", trainingPoolFile),
			"-f", writeFile(t, dir, "dev-pool.yaml", devPoolFile),
			"-f", writeFile(t, dir, "inference-pool.yaml", inferencePoolFile),
			"-f", writeFile(t, dir, "compute-pool.yaml", computePoolFile))
		assert.Equal(t, "pool.runwhere.ai/training-pool created\nnode/a100-node-4 labeled\n"+
			"pool.runwhere.ai/dev-pool created\nnode/gpu-node-5 labeled\n"+
			"pool.runwhere.ai/inference-pool created\nnode/gpu-node-6 labeled\n"+
			"pool.runwhere.ai/compute-pool created\nnode/cpu-node-1 labeled\n", out)
		// gpu-type, and gpuctl's gpuType that its pods select on (gpuctl itself writes
		// only gpu-type, so its pods naming a GPU type never schedule).
		for node, want := range map[string][3]string{"a100-node-4": {"training-pool", "A100-80G", "A100-80G"}, "gpu-node-5": {"dev-pool", "RTX4090-24G", "RTX4090-24G"},
			"gpu-node-6": {"inference-pool", "A10-24G", "A10-24G"}, "cpu-node-1": {"compute-pool", "", ""}} {
			n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, [3]string{n.Labels["runwhere.ai/pool"], n.Labels["runwhere.ai/gpu-type"], n.Labels["runwhere.ai/gpuType"]}, node)
		}
		// gpuctl's files carry no pool type; the operator sets it, as gpuctl's guide plans them.
		mustLitepool(t, "edit", "pool", "dev-pool", "--type", "Development")
		mustLitepool(t, "edit", "pool", "inference-pool", "--type", "Inference")
		mustLitepool(t, "edit", "pool", "compute-pool", "--type", "Compute")
	})

	t.Run("gpuctl's keys are no typos to the node webhook", func(t *testing.T) {
		// As gpuctl's `label node` writes them: a merge patch straight to the API server.
		patch := []byte(`{"metadata":{"labels":{"runwhere.ai/gpuType":"A10-24G","runwhere.ai/priority":"high"}}}`)
		_, err := kube.CoreV1().Nodes().Patch(ctx, "gpu-node-6", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
		_, err = kube.CoreV1().Nodes().Patch(ctx, "gpu-node-6", types.MergePatchType, []byte(`{"metadata":{"labels":{"runwhere.ai/gputype":"A10-24G"}}}`), metav1.PatchOptions{})
		require.Error(t, err, "a real typo is still refused")
		assert.Contains(t, err.Error(), `[N1] unknown label key "runwhere.ai/gputype"`)
	})

	t.Run("a gpuctl quota file makes a ResourceQuota per namespace", func(t *testing.T) {
		out := mustLitepool(t, "create", "-f", writeFile(t, dir, "quota.yaml", quotaFile))
		assert.Equal(t, "namespace/gpuctl-team created\nresourcequota/team-quota-gpuctl-team created (namespace gpuctl-team)\n", out)
		ns, err := kube.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "true", ns.Labels["runwhere.ai/namespace"], "gpuctl finds its namespaces by this label")
		rq, err := kube.CoreV1().ResourceQuotas(team).Get(ctx, "team-quota-gpuctl-team", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"runwhere.ai/quota": "team-quota", "runwhere.ai/namespace": team}, rq.Labels)
		var hard []string
		for _, k := range []corev1.ResourceName{"requests.cpu", "requests.memory", "requests.nvidia.com/gpu"} {
			q := rq.Spec.Hard[k]
			hard = append(hard, string(k)+"="+q.String())
		}
		assert.Equal(t, []string{"requests.cpu=8", "requests.memory=16Gi", "requests.nvidia.com/gpu=4"}, hard)
	})

	_, err := kube.SchedulingV1().PriorityClasses().Create(ctx, gpuctlPriorityClass(), metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("each kind of gpuctl workload lands in its pool", func(t *testing.T) {
		train := gpuctlJob{Name: "train-llm", Kind: "training", Pool: "training-pool", GPUType: "A100-80G", GPUs: 1}
		serve := gpuctlJob{Name: "serve-llm", Kind: "inference", Pool: "inference-pool", GPUs: 1}
		notebook := gpuctlJob{Name: "notebook-1", Kind: "notebook", Pool: "dev-pool", GPUs: 1}
		etl := gpuctlJob{Name: "etl", Kind: "compute", Pool: "compute-pool", Port: 8000}
		dflt := gpuctlJob{Name: "train-default", Kind: "training"} // gpuctl's default pool
		_, err := kube.BatchV1().Jobs(team).Create(ctx, train.trainingJob(team), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.AppsV1().Deployments(team).Create(ctx, serve.deployment(team), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.AppsV1().StatefulSets(team).Create(ctx, notebook.statefulSet(team), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.AppsV1().Deployments(team).Create(ctx, etl.deployment(team), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.BatchV1().Jobs(team).Create(ctx, dflt.trainingJob(team), metav1.CreateOptions{})
		require.NoError(t, err)

		for selector, wantPool := range map[string]string{
			"job-name=train-llm": "training-pool", "app=serve-llm": "inference-pool",
			"app=notebook-1": "dev-pool", "app=etl": "compute-pool", "job-name=train-default": "",
		} {
			pod := runningPod(t, selector)
			node, err := kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, wantPool, node.Labels["runwhere.ai/pool"], "%s ran on %s", selector, node.Name)
			if wantPool != "" {
				assert.Equal(t, wantPool, pod.Spec.NodeSelector["runwhere.ai/pool"], selector)
			}
			assert.Equal(t, "medium", pod.Labels["runwhere.ai/priority"], selector)
		}
	})

	t.Run("cross-type and wrong-GPU workloads are refused, as FailedCreate events naming the rule", func(t *testing.T) {
		serveInDev := gpuctlJob{Name: "serve-in-dev", Kind: "inference", Pool: "dev-pool", GPUs: 1}
		notebookInServing := gpuctlJob{Name: "nb-in-serving", Kind: "notebook", Pool: "inference-pool"}
		wrongGPU := gpuctlJob{Name: "train-on-a10", Kind: "training", Pool: "training-pool", GPUType: "A10-24G", GPUs: 1}
		_, err := kube.AppsV1().Deployments(team).Create(ctx, serveInDev.deployment(team), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.AppsV1().StatefulSets(team).Create(ctx, notebookInServing.statefulSet(team), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.BatchV1().Jobs(team).Create(ctx, wrongGPU.trainingJob(team), metav1.CreateOptions{})
		require.NoError(t, err)

		failedCreate(t, "ReplicaSet", "serve-in-dev-",
			`[P3] pool "dev-pool" (type Development) does not accept inference work (label runwhere.ai/job-type=inference): it accepts development; use a pool that takes inference work`)
		failedCreate(t, "StatefulSet", "nb-in-serving",
			`[P3] pool "inference-pool" (type Inference) does not accept development work (label runwhere.ai/job-type=notebook): it accepts inference; use a pool that takes development work`)
		failedCreate(t, "Job", "train-on-a10",
			`[P5] nodeSelector runwhere.ai/gpuType=A10-24G does not match pool "training-pool", whose nodes are runwhere.ai/gpu-type=A100-80G: ask for runwhere.ai/gpuType=A100-80G or use a pool of the gpu-type you need`)
	})

	t.Run("get quota shows use against the limits", func(t *testing.T) {
		// The Jobs' pods have finished (kwok completes them) and count no more; the
		// inference, notebook and compute pods run: 1 CPU and 1Gi each, two take a GPU.
		for _, job := range []string{"train-llm", "train-default"} {
			poll(t, "job "+job+" to complete", func() (bool, error) {
				j, err := kube.BatchV1().Jobs(team).Get(ctx, job, metav1.GetOptions{})
				return err == nil && j.Status.Succeeded == 1, err
			})
		}
		want := "NAMESPACE     QUOTA        CPU   MEMORY     GPU\ngpuctl-team   team-quota   3/8   3Gi/16Gi   2/4\n"
		var last string
		// Registered before the wait, so that a wait that times out still shows what
		// the namespace held (CI saw it time out once, with nothing to read).
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("last get quota:\n%s", last)
				for _, what := range []string{"events", "resourcequota", "pods"} {
					r := framework.C.Kubectl(t, "", "get", what, "-n", team, "-o", "wide")
					t.Logf("%s:\n%s", what, r.Stdout)
				}
			}
		})
		poll(t, "the quota's use", func() (bool, error) {
			last = mustLitepool(t, "get", "quota", "-n", team)
			return last == want, nil
		})
		assert.Equal(t, want, last)
	})

	t.Run("an empty pool label does not escape the namespace's default pool", func(t *testing.T) {
		const nsName = "defaulted-team"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName,
			Labels: map[string]string{"runwhere.ai/pool": "training-pool"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod := func(name, jobType string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"runwhere.ai/pool": "", "runwhere.ai/job-type": jobType}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
		}
		// The webhook refuses a pod of a namespace its cache has not seen yet, asking for
		// a retry: the namespace was created a moment ago.
		poll(t, "the webhook knows namespace "+nsName, func() (bool, error) {
			_, err = kube.CoreV1().Pods(nsName).Create(ctx, pod("serve", "inference"), metav1.CreateOptions{})
			return err == nil || !strings.Contains(err.Error(), "is not in the webhook's cache yet"), nil
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `[P3] pool "training-pool" (type Training) does not accept inference work (label runwhere.ai/job-type=inference)`)
		got, err := kube.CoreV1().Pods(nsName).Create(ctx, pod("train", "training"), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, "training-pool", got.Labels["runwhere.ai/pool"])
		assert.Equal(t, "training-pool", got.Spec.NodeSelector["runwhere.ai/pool"])
	})
}

// runningPod waits for the one pod selected in the team namespace to run (or to have
// run), and returns it.
func runningPod(t *testing.T, selector string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	var seen []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pods %s: %v", selector, seen)
		}
	})
	poll(t, "a running pod "+selector, func() (bool, error) {
		list, err := framework.C.Kube.CoreV1().Pods(team).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, p := range list.Items {
			seen = append(seen, fmt.Sprintf("%s %s on %q %v", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions))
		}
		if len(list.Items) != 1 {
			return false, nil
		}
		pod = &list.Items[0]
		// kwok plays the kubelet: a Job's pod runs, then succeeds.
		ran := pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded
		return ran && pod.Spec.NodeName != "", nil
	})
	return pod
}

// failedCreate waits for a FailedCreate event on the controller named (or prefixed)
// name whose message carries want.
func failedCreate(t *testing.T, kind, name, want string) {
	t.Helper()
	var seen []string
	poll(t, "FailedCreate on "+kind+" "+name, func() (bool, error) {
		sel := fields.Set{"involvedObject.kind": kind, "reason": "FailedCreate"}.AsSelector().String()
		list, err := framework.C.Kube.CoreV1().Events(team).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range list.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, name) {
				seen = append(seen, e.Message)
				if strings.Contains(e.Message, want) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	t.Logf("%s %s: %v", kind, name, seen)
}

// A MIG node through the real API (protobuf lists, the inventory's scanner): GPUs and
// slices are counted apart.
func TestMIGNodeCountsWholeGPUsOnly(t *testing.T) {
	kube := framework.C.Kube
	q := resource.MustParse
	res := corev1.ResourceList{"cpu": q("32"), "memory": q("256Gi"), "pods": q("110"), "nvidia.com/gpu": q("2"), "nvidia.com/mig-1g.10gb": q("14")}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "mig-node-1", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": "mig-node-1", "type": "kwok", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res},
	}
	_, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	require.NoError(t, err)
	for name, r := range map[string]corev1.ResourceList{
		"whole": {"nvidia.com/gpu": q("1")}, "slices": {"nvidia.com/mig-1g.10gb": q("3")},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mig-" + name},
			Spec: corev1.PodSpec{NodeName: "mig-node-1", Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}}}}
		_, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	want := "mig-node-1   default   <none>   Running   NVIDIA-A100-SXM4-80GB   2     1     1     nvidia.com/gpu   <none>   2     mig-1g.10gb=3/14\n"
	var last string
	poll(t, "mig-node-1 Running", func() (bool, error) {
		last = mustLitepool(t, "get", "nodes", "mig-node-1", "-o", "wide", "--no-headers")
		return last == want, nil
	})
	assert.Equal(t, want, last)
	desc := mustLitepool(t, "describe", "node", "mig-node-1")
	assert.Contains(t, desc, "Accelerators:          nvidia.com/gpu: 2 total, 1 used, 1 free\n")
	assert.Contains(t, desc, "MIG Slices:            nvidia.com/mig-1g.10gb: 14 total, 3 used, 11 free (not counted as GPUs)\n")
}
