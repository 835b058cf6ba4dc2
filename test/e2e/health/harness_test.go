package health

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	waitInterval = 200 * time.Millisecond
	waitTimeout  = 90 * time.Second
	stressImage  = "registry.example.com/npu-stress:1.0"
	resourceName = corev1.ResourceName("huawei.com/Ascend910")
)

// replica is one litepool-webhook process with its controllers on.
type replica struct{ *framework.Litepool }

// startController runs litepool-webhook with --controllers (no webhook: these tests
// need none), approving the test's stress image, and waits until it leads.
func startController(t *testing.T) *replica {
	t.Helper()
	return startControllerWith(t, "--health-images=registry.example.com/")
}

// startControllerWith is startController with the health flags given instead.
func startControllerWith(t *testing.T, healthFlags ...string) *replica {
	t.Helper()
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	l := framework.LaunchLitepool(t, certs.Dir, append([]string{"--controllers=true", "--leader-elect=true"}, healthFlags...)...)
	l.WaitLeader(t, waitTimeout)
	return &replica{l}
}

// healthPool makes a Pool with spec.health and n Ready Snt9B nodes NAME-1..n.
func healthPool(t *testing.T, name string, n int, h *v1alpha1.HealthPolicy) []string {
	t.Helper()
	nodes := framework.AscendPool(t, name, n, "24.1.rc2", v1alpha1.SoftwareSpec{})
	pools := poolclient.New(framework.C.Dynamic)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pools.Get(context.Background(), name)
		if err != nil {
			return err
		}
		p.Spec.Health = h
		p.Spec.StressTest = &v1alpha1.StressTestSpec{Image: stressImage, Tests: []v1alpha1.StressTest{"npu"}}
		_, err = pools.Update(context.Background(), p, metav1.UpdateOptions{})
		return err
	}))
	return nodes
}

func seconds(n int) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(n) * time.Second}
}

// setAllocatable plays the device plugin: n healthy devices of the node's 8.
func setAllocatable(t *testing.T, node string, n int64) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := framework.Node(t, node)
		cur.Status.Allocatable[resourceName] = *resource.NewQuantity(n, resource.DecimalSI)
		_, err := framework.C.Kube.CoreV1().Nodes().UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	}))
}

// setCondition plays Node Problem Detector.
func setCondition(t *testing.T, node, typ string, status corev1.ConditionStatus) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := framework.Node(t, node)
		found := false
		for i := range cur.Status.Conditions {
			if string(cur.Status.Conditions[i].Type) == typ {
				cur.Status.Conditions[i].Status, found = status, true
				cur.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		if !found {
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status,
				Reason: "TestProblem", Message: "played by the e2e test", LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()})
		}
		_, err := framework.C.Kube.CoreV1().Nodes().UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	}))
}

func pool(t *testing.T, name string) *v1alpha1.Pool {
	t.Helper()
	p, err := poolclient.New(framework.C.Dynamic).Get(context.Background(), name)
	require.NoError(t, err)
	return p
}

func entry(t *testing.T, poolName, node string) *v1alpha1.NodeHealthStatus {
	for _, e := range pool(t, poolName).Status.NodeHealth {
		if e.Node == node {
			return &e
		}
	}
	return nil
}

func stateOf(t *testing.T, poolName, node string) v1alpha1.NodeHealthState {
	if e := entry(t, poolName, node); e != nil {
		return e.State
	}
	return ""
}

// waitState waits until node's entry is in state ("" or Healthy: no entry or Healthy).
func waitState(t *testing.T, r *replica, poolName, node string, state v1alpha1.NodeHealthState) *v1alpha1.NodeHealthStatus {
	t.Helper()
	var last v1alpha1.NodeHealthState
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		last = stateOf(t, poolName, node)
		if state == v1alpha1.NodeHealthHealthy {
			return last == "" || last == state, nil
		}
		return last == state, nil
	})
	require.NoError(t, err, "node %s never reached %s (last %q); status: %+v\nlog:\n%s", node, state, last, pool(t, poolName).Status.NodeHealth, r.Logs.String())
	return entry(t, poolName, node)
}

func quarantineTaint(t *testing.T, node string) *corev1.Taint {
	for _, tn := range framework.Node(t, node).Spec.Taints {
		if tn.Key == policy.TaintQuarantine {
			return &tn
		}
	}
	return nil
}

// waitTaint waits until the node has (or has not) the quarantine taint.
func waitTaint(t *testing.T, node string, on bool) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return (quarantineTaint(t, node) != nil) == on, nil
	}), "node %s: quarantine taint should be %v", node, on)
}

// stressAgent plays the stress-test pods of the given nodes: each pod of a node in
// fail exits 1, the others 0.
type stressAgent struct {
	mu   sync.Mutex
	fail map[string]bool
}

func startStressAgent(t *testing.T) *stressAgent {
	a := &stressAgent{fail: map[string]bool{}}
	framework.CompletePods(t, localwebhook.Namespace, stress.LabelComponent+"="+stress.Component, func(p *corev1.Pod) (framework.PodEnd, bool) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.fail[p.Spec.NodeName] {
			return framework.PodEnd{Exit: 1, Message: "npu: HBM ECC errors"}, true
		}
		return framework.PodEnd{}, true
	})
	return a
}

func (a *stressAgent) failOn(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[node] = true
}

// gauge reads one litepool metric series of the replica: name{pool="pool",extra}.
func (r *replica) gauge(t *testing.T, name, pool, extra string) float64 {
	t.Helper()
	v, ok := framework.Sample(t, framework.Scrape(t, r.Metrics), name, `pool="`+pool+`"`, extra)
	if !ok {
		return -1
	}
	return v
}

// waitGauge waits until the gauge reads want.
func (r *replica) waitGauge(t *testing.T, name, pool, extra string, want float64) {
	t.Helper()
	var got float64
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		got = r.gauge(t, name, pool, extra)
		return got == want, nil
	}), "%s{pool=%q,%s} = %v, want %v", name, pool, extra, got, want)
}

// nodeEvents are the reasons of the Events about node, oldest first.
func nodeEvents(t *testing.T, node string) []string {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

func fromUnstructured(obj map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into)
}
