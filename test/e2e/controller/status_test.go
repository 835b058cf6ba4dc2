package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// figures is what must agree between the plugin, Pool status and the gauges.
type figures struct {
	Phase                   string
	Nodes, Healthy, Faulty  int32
	Resource                string
	Total, Used, Free       int64
	GPUTypes, Drivers       []string
	NodeStates, UpgradeSets map[string]int32
}

func figuresOf(s v1alpha1.PoolStatus) figures {
	return figures{s.Phase, s.NodeCount, s.HealthyNodes, s.FaultyNodes, string(s.AcceleratorResource),
		s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree, s.GPUTypes, s.DriverVersions, s.NodeStates, s.UpgradeStates}
}

// pluginPools is `kubectl litepool get pools -o json`: every pool, with or without an
// object, computed afresh from nodes and pods.
func pluginPools(t *testing.T) []v1alpha1.Pool {
	t.Helper()
	var list struct{ Items []v1alpha1.Pool }
	require.NoError(t, json.Unmarshal([]byte(framework.C.MustLitepool(t, "get", "pools", "-o", "json")), &list))
	require.NotEmpty(t, list.Items)
	return list.Items
}

// mismatch compares the plugin's pools with the stored Pool status (objects) and the
// scraped gauges (every pool); "" when they all agree.
func mismatch(t *testing.T, r *replica, want []v1alpha1.Pool) string {
	t.Helper()
	stored, err := poolclient.New(framework.C.Dynamic).List(context.Background())
	require.NoError(t, err)
	byName := map[string]v1alpha1.Pool{}
	for _, p := range stored {
		byName[p.Name] = p
	}
	metrics := r.scrape(t)
	var diffs []string
	for _, p := range want {
		if obj, ok := byName[p.Name]; ok {
			if got, exp := figuresOf(obj.Status), figuresOf(p.Status); !equality.Semantic.DeepEqual(got, exp) {
				diffs = append(diffs, fmt.Sprintf("pool %s: status %+v, get pools %+v", p.Name, got, exp))
			}
		}
		diffs = append(diffs, gaugeMismatch(metrics, p)...)
	}
	return strings.Join(diffs, "\n")
}

func gaugeMismatch(metrics map[string][]series, p v1alpha1.Pool) []string {
	var diffs []string
	check := func(name string, match map[string]string, want float64) {
		got, found := 0.0, false
		for _, s := range metrics[name] {
			if labelsMatch(s.labels, match) {
				got, found = s.value, true
			}
		}
		if !found || got != want {
			diffs = append(diffs, fmt.Sprintf("%s%v = %v (found %v), get pools says %v", name, match, got, found, want))
		}
	}
	acc := map[string]string{"pool": p.Name, "resource": string(p.Status.AcceleratorResource)}
	check("litepool_pool_accelerators_allocatable", acc, float64(p.Status.AcceleratorTotal))
	check("litepool_pool_accelerators_used", acc, float64(p.Status.AcceleratorUsed))
	check("litepool_pool_accelerators_free", acc, float64(p.Status.AcceleratorFree))
	for _, state := range []string{"Running", "NotReady", "Cordoned", "Draining", "Upgrading", "Degraded"} {
		check("litepool_pool_nodes", map[string]string{"pool": p.Name, "state": state}, float64(p.Status.NodeStates[state]))
	}
	return diffs
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// agree waits until Pool status and the gauges equal what get pools computes, and
// returns get pools' view.
func agree(t *testing.T, r *replica) map[string]v1alpha1.Pool {
	t.Helper()
	var want []v1alpha1.Pool
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		want = pluginPools(t)
		last = mismatch(t, r, want)
		return last == "", nil
	})
	require.NoError(t, err, "status and gauges never agreed with get pools:\n%s", last)
	out := map[string]v1alpha1.Pool{}
	for _, p := range want {
		out[p.Name] = p
	}
	return out
}

func gpuPod(name, node string, resourceName corev1.ResourceName, n string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{resourceName: resource.MustParse(n)}}}}},
	}
}

func createPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	_, err := framework.C.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { deletePod(t, pod) })
}

func deletePod(t *testing.T, pod *corev1.Pod) {
	zero := int64(0)
	_ = framework.C.Kube.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

func condition(t *testing.T, pool, typ string) *metav1.Condition {
	t.Helper()
	p, err := poolclient.New(framework.C.Dynamic).Get(context.Background(), pool)
	require.NoError(t, err)
	return apimeta.FindStatusCondition(p.Status.Conditions, typ)
}

func figuresLine(p v1alpha1.Pool) []int64 {
	return []int64{p.Status.AcceleratorTotal, p.Status.AcceleratorUsed, p.Status.AcceleratorFree}
}

func TestStatusAndGaugesFollowGetPools(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	registerWebhooks(t, r, certs)

	// The fixture as it is (get_pools_test.go in test/e2e/pools has the figures).
	pools := agree(t, r)
	assert.Equal(t, []int64{24, 12, 12}, figuresLine(pools["train-a100"]))
	assert.Equal(t, []int64{24, 8, 8}, figuresLine(pools["train-snt9b"]), "NotReady snt9b-node-3: in the total, not in free")
	assert.Equal(t, []int64{8, 2, 2}, figuresLine(pools["infer-a10"]), "a label-only pool: gauges only; cordoned a10-node-2 not in free")
	assert.Equal(t, metav1.ConditionTrue, condition(t, "train-snt9b", "Degraded").Status, "snt9b-node-3 is NotReady")
	assert.Equal(t, metav1.ConditionTrue, condition(t, "dev-sandbox", "BelowMinNodes").Status, "no nodes, minNodes 1")
	assert.Equal(t, metav1.ConditionFalse, condition(t, "train-a100", "Degraded").Status)

	// Pods come: 4 GPUs on a100-node-3; 8 NPUs on the NotReady snt9b-node-3, whose
	// accelerators are in the total and not in free: used grows, free does not fall.
	a100 := gpuPod("ctl-a100", "a100-node-3", "nvidia.com/gpu", "4")
	notReady := gpuPod("ctl-notready", "snt9b-node-3", "huawei.com/Ascend910", "8")
	createPod(t, a100)
	createPod(t, notReady)
	pools = agree(t, r)
	assert.Equal(t, []int64{24, 16, 8}, figuresLine(pools["train-a100"]))
	assert.Equal(t, []int64{24, 16, 8}, figuresLine(pools["train-snt9b"]), "a pod on a NotReady node takes nothing from free")

	// A node is cordoned: the pool turns Degraded, with a Warning Event.
	framework.C.Kubectl(t, "", "cordon", "a100-node-3")
	t.Cleanup(func() { framework.C.Kubectl(t, "", "uncordon", "a100-node-3") })
	pools = agree(t, r)
	assert.Equal(t, "Degraded", pools["train-a100"].Status.Phase)
	assert.Equal(t, map[string]int32{"Running": 2, "Cordoned": 1}, pools["train-a100"].Status.NodeStates)
	assert.Equal(t, []int64{24, 16, 4}, figuresLine(pools["train-a100"]), "the cordoned member's 4 idle GPUs are not free")
	assert.Equal(t, metav1.ConditionTrue, condition(t, "train-a100", "Degraded").Status)
	waitForEvent(t, "train-a100", "DegradedTrue")

	// Pods go: one deleted, one finished; the node is uncordoned.
	deletePod(t, a100)
	finished := gpuPod("ctl-finished", "a100-node-4", "nvidia.com/gpu", "8")
	createPod(t, finished)
	agree(t, r)
	setPhase(t, finished, corev1.PodSucceeded)
	framework.C.Kubectl(t, "", "uncordon", "a100-node-3")
	pools = agree(t, r)
	assert.Equal(t, []int64{24, 12, 12}, figuresLine(pools["train-a100"]))
	assert.Equal(t, []int64{8, 0, 8}, figuresLine(pools["default"]))
	assert.Equal(t, metav1.ConditionFalse, condition(t, "train-a100", "Degraded").Status)
	waitForEvent(t, "train-a100", "DegradedFalse")

	// Plain kubectl shows the figures through the CRD's printer columns.
	out := framework.C.Kubectl(t, "", "get", "pools", "train-a100", "--no-headers", "-o",
		"custom-columns=T:.status.acceleratorTotal,U:.status.acceleratorUsed,F:.status.acceleratorFree")
	assert.Equal(t, "24    12    12\n", out.Stdout)
	header := framework.C.Kubectl(t, "", "get", "pools").Stdout
	assert.Regexp(t, `(?m)^NAME\s+TYPE\s+ACCELERATOR\s+STATUS\s+NODES\s+TOTAL\s+USED\s+FREE\s+MIN NODES`, header)
	assert.Regexp(t, `(?m)^train-a100\s+Training\s+A100-80G\s+Running\s+3\s+24\s+12\s+12\s+2`, header)
}

func setPhase(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := framework.C.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == phase {
			return true, nil
		}
		p.Status.Phase = phase
		_, _ = framework.C.Kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return false, nil
	})
	require.NoError(t, err)
}

// waitForEvent waits for an Event the controller recorded on a Pool.
func waitForEvent(t *testing.T, pool, reason string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		evs, err := framework.C.Kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.ReportingController == "litepool-controller" && e.Regarding.Kind == "Pool" &&
				e.Regarding.Name == pool && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no %s Event on Pool %s", reason, pool)
}
