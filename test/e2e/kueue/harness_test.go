package kueue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	gpu          = corev1.ResourceName("nvidia.com/gpu")
	waitInterval = 100 * time.Millisecond
	waitTimeout  = 90 * time.Second
)

func kueueGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
}

var (
	flavors       = kueueGVR("resourceflavors")
	clusterQueues = kueueGVR("clusterqueues")
	localQueues   = kueueGVR("localqueues")
	workloads     = kueueGVR("workloads")
)

func dyn(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return framework.C.Dynamic.Resource(gvr)
	}
	return framework.C.Dynamic.Resource(gvr).Namespace(namespace)
}

// gpuNodes registers n kwok nodes NAME-1..n of gpus nvidia.com/gpu each, with labels,
// and waits until kwok keeps them Ready.
func gpuNodes(t *testing.T, name string, n int, gpus int64, labels map[string]string) []string {
	t.Helper()
	var names []string
	for i := 1; i <= n; i++ {
		node := fmt.Sprintf("%s-%d", name, i)
		framework.CreateReadyNode(t, framework.C.Kube, node, "")
		if len(labels) > 0 || gpus != 8 {
			patchNode(t, node, func(n *corev1.Node) {
				for k, v := range labels {
					n.Labels[k] = v
				}
			})
			setAllocatable(t, node, gpus, gpus)
		}
		names = append(names, node)
	}
	return names
}

// patchNode updates a node with a retry on conflict.
func patchNode(t *testing.T, name string, mutate func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(n)
		_, err = framework.C.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, ignoreConflict(err)
	}))
}

// setAllocatable plays the device plugin: the node reports gpus allocatable of capacity.
func setAllocatable(t *testing.T, name string, allocatable, capacity int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Status.Allocatable[gpu] = *resource.NewQuantity(allocatable, resource.DecimalSI)
		n.Status.Capacity[gpu] = *resource.NewQuantity(capacity, resource.DecimalSI)
		_, err = framework.C.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err == nil, ignoreConflict(err)
	}))
}

func ignoreConflict(err error) error {
	if err == nil || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// gpuJob is a Job of pods pods of perPod GPUs each, queued to queue, whose pods carry
// podLabels. kwok completes a Job's pods as soon as they run; hold gives them a
// scheduling gate nobody removes instead, so the admitted Job keeps its quota (as one
// whose pods wait for an image would).
func gpuJob(namespace, name, queue string, pods int32, perPod int64, podLabels map[string]string, hold bool) *batchv1.Job {
	var gates []corev1.PodSchedulingGate
	if hold {
		gates = []corev1.PodSchedulingGate{{Name: "e2e.litepool/hold"}}
	}
	req := corev1.ResourceList{gpu: *resource.NewQuantity(perPod, resource.DecimalSI)}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{framework.KueueQueueLabel: queue}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods), Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, SchedulingGates: gates,
					Containers: []corev1.Container{{Name: "train", Image: "registry.example.com/train:1.0",
						Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}}},
			},
		},
	}
}

func createJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	_, err := framework.C.Kube.BatchV1().Jobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = framework.C.Kube.BatchV1().Jobs(job.Namespace).Delete(context.Background(), job.Name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
}

// jobPods are the pods of a Job, by the label the Job controller sets.
func jobPods(t *testing.T, namespace, job string) []corev1.Pod {
	t.Helper()
	pods, err := framework.C.Kube.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	require.NoError(t, err)
	return pods.Items
}

// waitJobPodsRunning waits until n pods of the Job run, and returns them.
func waitJobPodsRunning(t *testing.T, namespace, job string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		pods = nil
		for _, p := range jobPods(t, namespace, job) {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
				pods = append(pods, p)
			}
		}
		return len(pods) >= n, nil
	})
	require.NoError(t, err, "Job %s/%s: %d of %d pods ran; workload: %s", namespace, job, len(pods), n, workloadSummary(t, namespace, job))
	return pods
}

// workloadOf is the Workload Kueue made for a Job (it owns it), or nil.
func workloadOf(t *testing.T, namespace, job string) *unstructured.Unstructured {
	t.Helper()
	list, err := dyn(workloads, namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		for _, o := range list.Items[i].GetOwnerReferences() {
			if o.Kind == "Job" && o.Name == job {
				return &list.Items[i]
			}
		}
	}
	return nil
}

// condition is a condition of an unstructured object's status.
func condition(obj *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

func workloadSummary(t *testing.T, namespace, job string) string {
	wl := workloadOf(t, namespace, job)
	if wl == nil {
		return "none"
	}
	s, r, m := condition(wl, "QuotaReserved")
	a, _, _ := condition(wl, "Admitted")
	return fmt.Sprintf("%s QuotaReserved=%s (%s: %s) Admitted=%s", wl.GetName(), s, r, m, a)
}

// waitAdmitted waits until Kueue admits the Job's Workload.
func waitAdmitted(t *testing.T, namespace, job string) *unstructured.Unstructured {
	t.Helper()
	var wl *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		wl = workloadOf(t, namespace, job)
		if wl == nil {
			return false, nil
		}
		s, _, _ := condition(wl, "Admitted")
		return s == "True", nil
	})
	require.NoError(t, err, "Job %s/%s never admitted; workload: %s", namespace, job, workloadSummary(t, namespace, job))
	return wl
}

func createObject(t *testing.T, gvr schema.GroupVersionResource, namespace string, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	_, err := dyn(gvr, namespace).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dyn(gvr, namespace).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
}

func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	_, err := framework.C.Kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
}
