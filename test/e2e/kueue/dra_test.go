package kueue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// The package's Kueue maps DeviceClass draClass to the logical resource draResource
// (its Configuration's resources.deviceClassMappings; TestMain).
const (
	draResource = corev1.ResourceName("example.com/gpu")
	draClass    = "kueue-gpu.example.com"
	draDriver   = "kueue-gpu.example.com"
)

var deviceClasses = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}

// draNodes registers n kwok nodes of pool with no nvidia.com/gpu and publishes, as the
// DRA driver would, a ResourceSlice of devices devices for each.
func draNodes(t *testing.T, pool string, n, devices int) []string {
	t.Helper()
	ctx := context.Background()
	var nodes []string
	for i := 1; i <= n; i++ {
		node := fmt.Sprintf("%s-%d", pool, i)
		framework.CreateReadyNode(t, framework.C.Kube, node, pool)
		require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
			got, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			delete(got.Status.Allocatable, gpu)
			delete(got.Status.Capacity, gpu)
			_, err = framework.C.Kube.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
			return err == nil, ignoreConflict(err)
		}))
		slice := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-" + draDriver},
			Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: ptr.To(node),
				Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
		}
		for d := 0; d < devices; d++ {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To("H100-80G")}}})
		}
		_, err := framework.C.Kube.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = framework.C.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
		})
		nodes = append(nodes, node)
	}
	return nodes
}

// draJob is a Job of pods pods, each claiming perPod devices of draClass through the
// ResourceClaimTemplate template, queued to queue.
func draJob(namespace, name, queue, template string, pods int32, podLabels map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{framework.KueueQueueLabel: queue}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods), Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}},
					Containers: []corev1.Container{{Name: "train", Image: "registry.example.com/train:1.0",
						Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}}},
			},
		},
	}
}

// waitQuotaOf waits until the ClusterQueue's quota of rn is want.
func waitQuotaOf(t *testing.T, name string, rn corev1.ResourceName, want string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return nominalQuotaOf(t, name, rn) == want, nil
	})
	require.NoError(t, err, "ClusterQueue %s: %s quota %q, want %q (Pool status.queue %+v)", name, rn, nominalQuotaOf(t, name, rn), want,
		getPool(t, name).Status.Queue)
}

// Issue 31's DRA case: a pool whose 3 nodes publish 8 devices each in ResourceSlices
// has a ClusterQueue quota of 24 of the logical resource Kueue maps the DeviceClass to.
// A Job whose pods claim 8 devices each through a ResourceClaimTemplate is admitted and
// its pods get devices of the pool's nodes; a cordoned node and a quarantined one take
// their 8 devices out of the quota, a 24-device Job waits for quota meanwhile, and is
// admitted when the node returns.
func TestPoolQueueCountsDRADevices(t *testing.T) {
	const pool, ns = "qdra", "q-dra"
	ctx := context.Background()
	createNamespace(t, ns, nil)
	createObject(t, deviceClasses, "", map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
		"metadata": map[string]any{"name": draClass},
		"spec":     map[string]any{"selectors": []any{map[string]any{"cel": map[string]any{"expression": `device.driver == "` + draDriver + `"`}}}}})
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Namespaces: []string{ns},
			Health:     &v1alpha1.HealthPolicy{HoldTime: &metav1.Duration{Duration: 2 * time.Second}, MaxQuarantinedPercent: 50},
			StressTest: &v1alpha1.StressTestSpec{Image: "registry.example.com/gpu-stress:1.0"},
			Queue: &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue,
				Devices: &v1alpha1.QueueDevices{Resource: draResource, DeviceClassNames: []string{draClass}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = poolclient.New(framework.C.Dynamic).Delete(context.Background(), pool, metav1.DeleteOptions{})
	})
	nodes := draNodes(t, pool, 3, 8)

	waitQuotaOf(t, pool, draResource, "24")
	waitQueueMessage(t, pool, "24 example.com/gpu (DRA devices) from 3 of 3 members")
	q := getPool(t, pool).Status.Queue
	require.NotNil(t, q)
	assert.Equal(t, draResource, q.DeviceResource)
	assert.EqualValues(t, 24, q.DeviceQuota)
	desc := framework.C.MustLitepool(t, "describe", "pool", pool)
	assert.Contains(t, desc, "Kueue ClusterQueue qdra: quota 24 example.com/gpu (DRA devices) from 3 schedulable nodes")
	assert.Regexp(t, `Queue Devices:\s+quota 24 example.com/gpu \(DRA devices of DeviceClasses `+draClass+`\)`, desc)

	_, err = framework.C.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "eight"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: draClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 8}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	podLabels := map[string]string{policy.LabelPool: pool}

	// 16 devices of 24: admitted; the scheduler allocates each pod 8 devices of the
	// pool's slices.
	createJob(t, draJob(ns, "dra-first", pool, "eight", 2, podLabels))
	wl := waitAdmitted(t, ns, "dra-first")
	t.Logf("admitted: %s", workloadSummary(t, ns, "dra-first"))
	assert.Contains(t, fmt.Sprint(wl.Object["status"]), string(draResource), "Kueue charged the claims to the logical resource")
	for _, pod := range waitJobPodsRunning(t, ns, "dra-first", 2) {
		assert.Contains(t, nodes, pod.Spec.NodeName)
	}
	waitJobDone(t, ns, "dra-first")

	// A cordon takes a member's 8 devices out; a 24-device Job waits for quota.
	patchNode(t, nodes[0], func(n *corev1.Node) { n.Spec.Unschedulable = true })
	waitQuotaOf(t, pool, draResource, "16")
	createJob(t, draJob(ns, "dra-all", pool, "eight", 3, podLabels))
	var msg string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		wl := workloadOf(t, ns, "dra-all")
		if wl == nil {
			return false, nil
		}
		var status string
		status, _, msg = condition(wl, "QuotaReserved")
		return status == "False" && strings.Contains(msg, "insufficient"), nil
	}), "the 24-device Job should wait for quota: %s", workloadSummary(t, ns, "dra-all"))
	t.Logf("waiting Job: %s", msg)
	assert.Contains(t, msg, string(draResource))
	assert.Empty(t, jobPods(t, ns, "dra-all"), "no pod of a waiting Job")

	// The uncordon gives them back: the Job is admitted, each pod gets a node's 8.
	patchNode(t, nodes[0], func(n *corev1.Node) { n.Spec.Unschedulable = false })
	waitQuotaOf(t, pool, draResource, "24")
	waitAdmitted(t, ns, "dra-all")
	for _, pod := range waitJobPodsRunning(t, ns, "dra-all", 3) {
		assert.Contains(t, nodes, pod.Spec.NodeName)
	}
	waitJobDone(t, ns, "dra-all")

	// A Job admitted and held (its pod gated, as gpuJob's hold) uses 8 of the 24: the
	// Pool's status and get pools -o wide say so.
	held := draJob(ns, "dra-held", pool, "eight", 1, podLabels)
	held.Spec.Template.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "e2e.litepool/hold"}}
	createJob(t, held)
	waitAdmitted(t, ns, "dra-held")
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		q := getPool(t, pool).Status.Queue
		return q != nil && q.DeviceUsed == 8 && q.Admitted == 1, nil
	}), "Pool status.queue: %+v; ClusterQueue status: %v", getPool(t, pool).Status.Queue, cqStatus(t, pool))
	wide := framework.C.MustLitepool(t, "get", "pools", pool, "-o", "wide")
	t.Logf("kubectl litepool get pools -o wide:\n%s", wide)
	assert.Regexp(t, `8/24\s+1\s+0\s*$`, strings.TrimSpace(wide))

	// The driver taints a device (NVIDIA's turns an XID error into such a taint): the
	// health loop quarantines its node, and the node's 8 leave the quota; the taint
	// goes, the loop's re-check passes, the node and its 8 come back.
	playStressPods(t)
	faulty := nodes[1]
	start := time.Now()
	taintDevice(t, faulty+"-"+draDriver, true)
	tainted, dropped := deviceTransition(t, pool, faulty, true, "16")
	back := time.Now()
	taintDevice(t, faulty+"-"+draDriver, false)
	released, restored := deviceTransition(t, pool, faulty, false, "24")
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("fault: device taint -> quarantine taint %s -> quota 16 %s later (%s in all)",
		ms(tainted.Sub(start)), ms(dropped.Sub(tainted)), ms(dropped.Sub(start)))
	t.Logf("return: device taint removed -> quarantine taint removed %s (re-check and hold time) -> quota 24 %s later (%s in all)",
		ms(released.Sub(back)), ms(restored.Sub(released)), ms(restored.Sub(back)))

	// A slice the driver withdraws takes its node's devices out.
	require.NoError(t, framework.C.Kube.ResourceV1().ResourceSlices().Delete(ctx, nodes[2]+"-"+draDriver, metav1.DeleteOptions{}))
	waitQuotaOf(t, pool, draResource, "16")

	// The devices' own borrowing and lending limits, in a cohort: Kueue takes them.
	patch := framework.C.Kubectl(t, "", "patch", "pools.runwhere.ai", pool, "--type", "merge", "-p",
		`{"spec":{"queue":{"cohort":"qdra-cohort","devices":{"borrowingLimit":8,"lendingLimit":0}}}}`)
	require.Equal(t, 0, patch.ExitCode, patch.Stderr)
	var limits map[string]any
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		cq, err := dyn(clusterQueues, "").Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
		for _, g := range groups {
			for _, f := range g.(map[string]any)["flavors"].([]any) {
				for _, r := range f.(map[string]any)["resources"].([]any) {
					if rm := r.(map[string]any); rm["name"] == string(draResource) {
						limits = rm
					}
				}
			}
		}
		return limits["borrowingLimit"] == "8" && limits["lendingLimit"] == "0", nil
	}), "the device resource's limits: %v", limits)
	cond := waitQueueCondition(t, pool)
	assert.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)
}

// taintDevice puts (on) or takes away a NoSchedule taint on the first device of a slice,
// as the driver would.
func taintDevice(t *testing.T, slice string, on bool) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		s, err := framework.C.Kube.ResourceV1().ResourceSlices().Get(ctx, slice, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s.Spec.Devices[0].Taints = nil
		if on {
			s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "example.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
		_, err = framework.C.Kube.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
		return err == nil, ignoreConflict(err)
	}))
}

// deviceTransition is transition for the pool's device quota.
func deviceTransition(t *testing.T, pool, node string, on bool, quota string) (taint, quotaAt time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		if taint.IsZero() && hasQuarantineTaint(t, node) == on {
			taint = time.Now()
		}
		if quotaAt.IsZero() && !taint.IsZero() && nominalQuotaOf(t, pool, draResource) == quota {
			quotaAt = time.Now()
		}
		return !taint.IsZero() && !quotaAt.IsZero(), nil
	})
	require.NoError(t, err, "node %s: quarantine taint %v seen at %v; ClusterQueue %s: %s quota %q, want %q; health: %+v", node, on, taint, pool,
		draResource, nominalQuotaOf(t, pool, draResource), quota, getPool(t, pool).Status.NodeHealth)
	return taint, quotaAt
}
