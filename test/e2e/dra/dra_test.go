package dra

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	namespace    = "dra-e2e"
	pool         = "train-dra"
	waitInterval = 250 * time.Millisecond
	waitTimeout  = 90 * time.Second
)

// The pool's figures once every pod below runs: 6 physical GPUs (the partitioned one
// counts once); allocated: the GPU whose half a pod holds, two whole GPUs by claim
// template and one through the extended-resource mapping; gpu-3 is tainted.
var want = v1alpha1.DRAStatus{Total: 6, Allocated: 4, Free: 1, Unhealthy: 1}

func TestDRAFigures(t *testing.T) {
	c := framework.C
	ctx := context.Background()
	out := c.Kubectl(t, "", "apply", "-f", filepath.Join("testdata", "cluster.yaml"))
	require.Equal(t, 0, out.ExitCode, out.Stderr)
	waitReady(t, "dra-node-1", "dra-node-2")

	// The half first: once it holds part of gpu-0's counters, the whole gpu-0 cannot be
	// allocated, so the figures below do not depend on where the scheduler puts the rest.
	half := claimPod("half", "half-gpu", map[string]string{"kubernetes.io/hostname": "dra-node-2"})
	createRunning(t, half)
	for _, name := range []string{"whole-a", "whole-b"} {
		createRunning(t, claimPod(name, "one-gpu", map[string]string{"runwhere.ai/pool": pool}))
	}
	// A pod asking for nvidia.com/gpu where no device plugin offers it: the scheduler
	// makes a claim of class gpu.example.com (extendedResourceName) and allocates it.
	extended := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "extended", Namespace: namespace, Labels: map[string]string{"runwhere.ai/pool": pool}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"runwhere.ai/pool": pool},
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			}}},
		},
	}
	createRunning(t, extended)
	got, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, "extended", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.Status.ExtendedResourceClaimStatus, "the scheduler served nvidia.com/gpu through a claim")

	t.Run("get pools", func(t *testing.T) {
		p := pluginPool(t)
		require.NotNil(t, p.Status.DRA)
		assert.Equal(t, want, figures(*p.Status.DRA))
		assert.Equal(t, int64(0), p.Status.AcceleratorTotal, "no device plugin: no extended-resource GPUs")
		assert.Equal(t, int64(0), p.Status.AcceleratorUsed, "the extended-resource pod's GPU is counted once, as a DRA device")
		require.Len(t, p.Status.DRA.Devices, 1)
		d := p.Status.DRA.Devices[0]
		assert.Equal(t, v1alpha1.DRADeviceStatus{Driver: "gpu.example.com", DeviceClass: "gpu.example.com", Model: "H100-80G",
			Total: 6, Allocated: 4, Free: 1, Unhealthy: 1, Partitionable: 1, PartitionsAllocated: 1}, d)

		wide := c.MustLitepool(t, "get", "pools", "-o", "wide")
		header, row := tableRow(t, wide, pool)
		assert.Equal(t, "6", row[col(t, header, "DRA TOTAL")], wide)
		assert.Equal(t, "4", row[col(t, header, "DRA ALLOCATED")], wide)
		assert.Equal(t, "1", row[col(t, header, "DRA FREE")], wide)
		assert.Equal(t, "1", row[col(t, header, "DRA UNHEALTHY")], wide)
		assert.Equal(t, "gpu.example.com/H100-80G=4/6", row[col(t, header, "DRA DEVICES")], wide)
		assert.Equal(t, "0", row[col(t, header, "GPU TOTAL")], wide)
	})

	t.Run("get nodes", func(t *testing.T) {
		wide := c.MustLitepool(t, "get", "nodes", "--pool", pool, "-o", "wide")
		header, n1 := tableRow(t, wide, "dra-node-1")
		_, n2 := tableRow(t, wide, "dra-node-2")
		total, unhealthy := col(t, header, "DRA TOTAL"), col(t, header, "DRA UNHEALTHY")
		alloc, free := col(t, header, "DRA ALLOCATED"), col(t, header, "DRA FREE")
		assert.Equal(t, []string{"4", "1"}, []string{n1[total], n1[unhealthy]}, wide)
		assert.Equal(t, []string{"2", "0"}, []string{n2[total], n2[unhealthy]}, wide)
		// gpu-0 of dra-node-2 is held by the half; where the three others went is the
		// scheduler's choice, but together they make 4 allocated and 1 free.
		assert.Equal(t, 4, atoi(t, n1[alloc])+atoi(t, n2[alloc]), wide)
		assert.Equal(t, 1, atoi(t, n1[free])+atoi(t, n2[free]), wide)
		assert.GreaterOrEqual(t, atoi(t, n2[alloc]), 1, wide)

		desc := c.MustLitepool(t, "describe", "node", "dra-node-2")
		assert.Regexp(t, `DRA Devices:\s+2 total, \d allocated, \d free, 0 unhealthy`, desc)
		assert.Regexp(t, `gpu.example.com gpu.example.com H100-80G:\s+2 total, .*\(1 partitionable, 1 partitions allocated\)`, desc)
		desc = c.MustLitepool(t, "describe", "pool", pool)
		assert.Regexp(t, `DRA Devices:\s+6 total, 4 allocated, 1 free, 1 unhealthy`, desc)
	})

	t.Run("Pool status and metrics from the controller", func(t *testing.T) {
		r := startController(t)
		var status *v1alpha1.DRAStatus
		require.Eventually(t, func() bool {
			out := c.Kubectl(t, "", "get", "pool", pool, "-o", "json")
			var p v1alpha1.Pool
			if out.ExitCode != 0 || json.Unmarshal([]byte(out.Stdout), &p) != nil {
				return false
			}
			status = p.Status.DRA
			return status != nil && equality.Semantic.DeepEqual(figures(*status), want)
		}, waitTimeout, waitInterval, "Pool status.dra: %+v", status)
		assert.Equal(t, pluginPool(t).Status.DRA, status, "the controller and get pools agree")

		var gauges map[string]float64
		require.Eventually(t, func() bool {
			gauges = draGauges(t, r)
			return gauges["total"] == 6 && gauges["allocated"] == 4 && gauges["free"] == 1 && gauges["unhealthy"] == 1
		}, waitTimeout, waitInterval, "litepool_pool_dra_devices{pool=%q}: %v", pool, gauges)

		// A device that turns unhealthy moves from free to unhealthy in the status.
		out := c.Kubectl(t, "", "patch", "resourceslice", "dra-node-1-gpu.example.com", "--type=json", "-p",
			`[{"op":"add","path":"/spec/devices/0/taints","value":[{"key":"gpu.example.com/xid","value":"48","effect":"NoSchedule"}]}]`)
		require.Equal(t, 0, out.ExitCode, out.Stderr)
		require.Eventually(t, func() bool {
			s := pluginPool(t).Status.DRA
			return s != nil && s.Unhealthy == 2
		}, waitTimeout, waitInterval)
		require.Eventually(t, func() bool {
			out := c.Kubectl(t, "", "get", "pool", pool, "-o", "jsonpath={.status.dra.unhealthy}")
			return strings.TrimSpace(out.Stdout) == "2"
		}, waitTimeout, waitInterval, "the controller follows the slice's taint")
	})
}

// figures is a status without its rows.
func figures(s v1alpha1.DRAStatus) v1alpha1.DRAStatus {
	s.Devices = nil
	return s
}

func claimPod(name, template string, nodeSelector map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"runwhere.ai/pool": pool}},
		Spec: corev1.PodSpec{
			NodeSelector:   nodeSelector,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}},
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Claims: []corev1.ResourceClaim{{Name: "gpu"}},
			}}},
		},
	}
}

// createRunning creates a pod and waits until the scheduler has bound it and kwok runs it.
func createRunning(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	kube := framework.C.Kube
	_, err := kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var got *corev1.Pod
	require.Eventually(t, func() bool {
		got, err = kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && got.Spec.NodeName != "" && got.Status.Phase == corev1.PodRunning
	}, waitTimeout, waitInterval, "pod %s bound and running: %+v", pod.Name, func() any {
		if got == nil {
			return nil
		}
		return got.Status
	}())
}

func waitReady(t *testing.T, nodes ...string) {
	t.Helper()
	for _, name := range nodes {
		require.Eventually(t, func() bool {
			n, err := framework.C.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionTrue
				}
			}
			return false
		}, waitTimeout, waitInterval, "node %s Ready", name)
	}
}

// pluginPool is the pool as `kubectl litepool get pools -o json` computes it.
func pluginPool(t *testing.T) v1alpha1.Pool {
	t.Helper()
	out := framework.C.MustLitepool(t, "get", "pools", "-o", "json")
	var list struct {
		Items []v1alpha1.Pool `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	for _, p := range list.Items {
		if p.Name == pool {
			return p
		}
	}
	t.Fatalf("pool %s not in get pools:\n%s", pool, out)
	return v1alpha1.Pool{}
}

// tableRow returns the header and the row whose first cell is name.
func tableRow(t *testing.T, table, name string) (header, row []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	header = splitColumns(lines[0])
	for _, l := range lines[1:] {
		cells := splitColumns(l)
		if len(cells) > 0 && cells[0] == name {
			require.Len(t, cells, len(header), "row %q of\n%s", name, table)
			return header, cells
		}
	}
	t.Fatalf("no row %s in\n%s", name, table)
	return nil, nil
}

// splitColumns splits a printed table line on runs of two or more spaces (cells hold
// no such runs; headers like "DRA TOTAL" have one space).
func splitColumns(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}

func col(t *testing.T, header []string, name string) int {
	t.Helper()
	for i, h := range header {
		if h == name {
			return i
		}
	}
	t.Fatalf("no column %s in %v", name, header)
	return -1
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// startController runs litepool-webhook with its controllers (not registered as a
// webhook: the figures are the controller's) and waits until it is ready.
func startController(t *testing.T) *localwebhook.Process {
	t.Helper()
	certs, err := localwebhook.NewCerts(filepath.Join(framework.Root, "_output", "e2e", framework.C.Name, "certs"))
	require.NoError(t, err)
	return framework.LaunchLitepool(t, certs.Dir, "--controllers=true").Process
}

var draSample = regexp.MustCompile(`(?m)^litepool_pool_dra_devices\{([^}]*)\} (\S+)$`)

// draGauges sums litepool_pool_dra_devices of the pool by state.
func draGauges(t *testing.T, p *localwebhook.Process) map[string]float64 {
	t.Helper()
	code, body := localwebhook.Get("http://" + p.Metrics + "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	out := map[string]float64{}
	for _, m := range draSample.FindAllStringSubmatch(body, -1) {
		if !strings.Contains(m[1], `pool="`+pool+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		state := regexp.MustCompile(`state="([^"]*)"`).FindStringSubmatch(m[1])
		require.NotNil(t, state, m[0])
		out[state[1]] += v
	}
	return out
}
