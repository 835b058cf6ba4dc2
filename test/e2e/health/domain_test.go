package health

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// rackLabel is the domain level of the domain tests' pools.
const rackLabel = "example.com/rack"

// domainHealthPool makes pool name of 8 nodes in two racks of 4 (name-1..4 in r1,
// name-5..8 in r2), spec.topology by rackLabel and spec.health h, its nodes in service.
func domainHealthPool(t *testing.T, name string, h *v1alpha1.HealthPolicy) []string {
	t.Helper()
	nodes := framework.AscendPool(t, name, 8, "24.1.rc2", v1alpha1.SoftwareSpec{})
	for i, n := range nodes {
		rack := map[bool]string{true: "r1", false: "r2"}[i < 4]
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := framework.Node(t, n)
			cur.Labels[rackLabel] = rack
			_, err := framework.C.Kube.CoreV1().Nodes().Update(context.Background(), cur, metav1.UpdateOptions{})
			return err
		}))
	}
	framework.WaitInService(t, framework.C.Kube, nodes...)
	pools := poolclient.New(framework.C.Dynamic)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pools.Get(context.Background(), name)
		if err != nil {
			return err
		}
		p.Spec.Topology = &v1alpha1.TopologySpec{Levels: []string{rackLabel}}
		p.Spec.Health = h
		p.Spec.StressTest = &v1alpha1.StressTestSpec{Image: stressImage, Tests: []v1alpha1.StressTest{"npu"}}
		_, err = pools.Update(context.Background(), p, metav1.UpdateOptions{})
		return err
	}))
	return nodes
}

// taintValues are the quarantine taints' values of nodes ("" for none).
func taintValues(t *testing.T, nodes []string) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		if q := quarantineTaint(t, n); q != nil {
			out[i] = q.Value
		}
	}
	return out
}

// waitTaints waits until nodes carry exactly these quarantine taint values.
func waitTaints(t *testing.T, r *replica, poolName string, nodes []string, want ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return assert.ObjectsAreEqual(want, taintValues(t, nodes)), nil
	})
	require.NoError(t, err, "taints %v, want %v; status: %+v\nlog:\n%s", taintValues(t, nodes), want, pool(t, poolName).Status.NodeHealth, r.Logs.String())
}

// waitDomains waits until the pool's domain view (status.topology, from policy.NodeOut,
// the computation that feeds the quota) shows the racks in these states.
func waitDomains(t *testing.T, poolName string, want map[string]string) *v1alpha1.TopologyStatus {
	t.Helper()
	var last *v1alpha1.TopologyStatus
	err := wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		last = pool(t, poolName).Status.Topology
		if last == nil {
			return false, nil
		}
		got := map[string]string{}
		for _, d := range append(append([]v1alpha1.DomainSummary{}, last.Fullest...), last.Freest...) {
			got[d.Name] = d.State
		}
		return assert.ObjectsAreEqual(want, got), nil
	})
	require.NoError(t, err, "status.topology %+v, want %v", last, want)
	return last
}

// quota is the pool's schedulable accelerators as the Kueue adapter would write them
// (policy.PoolCapacity over the members the API server holds now).
func quota(t *testing.T, p *v1alpha1.Pool, nodes []string) int64 {
	var members []*corev1.Node
	for _, n := range nodes {
		members = append(members, framework.Node(t, n))
	}
	return policy.PoolCapacity(p, members, policy.Accelerators{}).Accelerators
}

// Issue 41 item 2: 2 of rack r1's 4 members quarantined with domainOutPercent 50: the
// other 2 are held out with it (taint DomainHeldOut), r1 leaves the domain view and the
// quota whole; rack r2 going out as well would pass the breaker (50% of 8: 4), so its
// faults wait and it is not held, across a controller restart; r1's members return and
// r1 is back whole.
func TestDomainHeldOutWhole(t *testing.T) {
	r := startController(t)
	startStressAgent(t)
	nodes := domainHealthPool(t, "hl-domain", &v1alpha1.HealthPolicy{HoldTime: seconds(2), MaxQuarantinedPercent: 50, DomainOutPercent: 50})
	r1, r2 := nodes[:4], nodes[4:]
	waitDomains(t, "hl-domain", map[string]string{"r1": "Whole", "r2": "Whole"})
	assert.Equal(t, int64(64), quota(t, pool(t, "hl-domain"), nodes))

	setAllocatable(t, r1[0], 7)
	waitTaints(t, r, "hl-domain", r1, "DeviceUnhealthy", "", "", "")
	setAllocatable(t, r1[1], 7)
	waitTaints(t, r, "hl-domain", r1, "DeviceUnhealthy", "DeviceUnhealthy", "DomainHeldOut", "DomainHeldOut")
	e := waitState(t, r, "hl-domain", r1[2], v1alpha1.NodeHealthDomainOut)
	assert.Equal(t, policy.ReasonDomainHeldOut, e.Reason)
	assert.Equal(t, "domain r1 has 2 of 4 members out on their own signals (spec.health.domainOutPercent 50%): held out whole until fewer are", e.Message)
	assert.Contains(t, nodeEvents(t, r1[2]), "HealthDomainOut")
	topo := waitDomains(t, "hl-domain", map[string]string{"r1": "Out", "r2": "Whole"})
	assert.Equal(t, int32(1), topo.Out)
	p := pool(t, "hl-domain")
	assert.Equal(t, int32(4), p.Status.QuarantinedNodes, "the held members count as out")
	assert.Equal(t, int64(32), quota(t, p, nodes), "r1's 4 members leave the quota, not only its 2 faulty ones")
	t.Logf("r1 out whole: quota 64 -> %d accelerators; status.topology whole=%d out=%d largestFreeBlock=%d", quota(t, p, nodes), topo.Whole, topo.Out, topo.LargestFreeBlock)

	// The controller restarts: the new leader finds the hold in the cluster (taints,
	// entries) and keeps it.
	r.Kill()
	r = startController(t)

	// r2 faults as r1 did: the breaker (4 of 8) is full with r1, so r2's faults wait
	// (Waiting) and r2 is not held.
	setAllocatable(t, r2[0], 7)
	setAllocatable(t, r2[1], 7)
	waitState(t, r, "hl-domain", r2[0], v1alpha1.NodeHealthWaiting)
	waitState(t, r, "hl-domain", r2[1], v1alpha1.NodeHealthWaiting)
	assert.Equal(t, []string{"", "", "", ""}, taintValues(t, r2))
	assert.True(t, pool(t, "hl-domain").Status.BreakerTripped)
	assert.Equal(t, []string{"DeviceUnhealthy", "DeviceUnhealthy", "DomainHeldOut", "DomainHeldOut"}, taintValues(t, r1), "r1 keeps its place")
	setAllocatable(t, r2[0], 8)
	setAllocatable(t, r2[1], 8)
	// The loop has seen r2 recover before r1 frees the breaker (else r2's faults would
	// take the room r1 leaves).
	waitState(t, r, "hl-domain", r2[0], v1alpha1.NodeHealthHealthy)
	waitState(t, r, "hl-domain", r2[1], v1alpha1.NodeHealthHealthy)

	// r1's devices come back: re-checked, held 2s, returned; the domain comes back whole.
	setAllocatable(t, r1[0], 8)
	setAllocatable(t, r1[1], 8)
	waitTaints(t, r, "hl-domain", r1, "", "", "", "")
	e = waitState(t, r, "hl-domain", r1[2], v1alpha1.NodeHealthHealthy)
	if e != nil { // the returned member's entry is dropped on the pass after
		assert.Equal(t, policy.ReasonDomainReturned, e.Reason)
	}
	waitDomains(t, "hl-domain", map[string]string{"r1": "Whole", "r2": "Whole"})
	assert.Equal(t, int64(64), quota(t, pool(t, "hl-domain"), nodes))
	assert.Equal(t, []string{"", "", "", ""}, taintValues(t, r2))
}
