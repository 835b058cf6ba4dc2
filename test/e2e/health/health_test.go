package health

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// One controller runs the loop for every pool below; each case has a pool of its own.
func TestHealthLoop(t *testing.T) {
	r := startController(t)
	agent := startStressAgent(t)
	fast := func(percent int32) *v1alpha1.HealthPolicy {
		return &v1alpha1.HealthPolicy{HoldTime: seconds(2), MaxQuarantinedPercent: percent}
	}

	// The device plugin drops a device: the node is quarantined (taint, not cordon),
	// the Pool's status, kubectl's column and the gauge count it. The device comes back:
	// a re-check StressRun runs and passes, the hold time passes, the node returns.
	t.Run("allocatable drop quarantines, re-check passes, node returns", func(t *testing.T) {
		nodes := healthPool(t, "hl-alloc", 4, fast(50))
		n := nodes[0]
		start := time.Now()
		setAllocatable(t, n, 7)
		e := waitState(t, r, "hl-alloc", n, v1alpha1.NodeHealthQuarantined)
		waitTaint(t, n, true)
		t.Logf("quarantined %s after %s", n, time.Since(start).Round(10*time.Millisecond))
		assert.Equal(t, policy.SignalDeviceUnhealthy, e.Reason)
		assert.Equal(t, "the device plugin dropped devices: huawei.com/Ascend910 allocatable 7 < capacity 8", e.Message)
		taint := *quarantineTaint(t, n)
		assert.NotNil(t, taint.TimeAdded, "stamped with when the quarantine began: a release given before it does not apply")
		taint.TimeAdded = nil
		assert.Equal(t, corev1.Taint{Key: policy.TaintQuarantine, Value: "DeviceUnhealthy", Effect: corev1.TaintEffectNoSchedule}, taint)
		assert.False(t, framework.Node(t, n).Spec.Unschedulable, "a quarantine is not a cordon")
		assert.Equal(t, int32(1), pool(t, "hl-alloc").Status.QuarantinedNodes)
		out := framework.C.Kubectl(t, "", "get", "pools.runwhere.ai", "hl-alloc", "-o", "custom-columns=Q:.status.quarantinedNodes", "--no-headers")
		assert.Equal(t, "1\n", out.Stdout, out.Stderr)
		wide := framework.C.Kubectl(t, "", "get", "pools.runwhere.ai", "hl-alloc", "-o", "wide")
		assert.Contains(t, wide.Stdout, "QUARANTINED", wide.Stderr)
		r.waitGauge(t, "litepool_pool_quarantined_nodes", "hl-alloc", "", 1)
		assert.Contains(t, nodeEvents(t, n), "HealthQuarantined")

		// A node patcher cannot release it: the taint comes back.
		cur := framework.Node(t, n)
		cur.Spec.Taints = nil
		_, err := framework.C.Kube.CoreV1().Nodes().Update(context.Background(), cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitTaint(t, n, true)
		assert.Equal(t, v1alpha1.NodeHealthQuarantined, stateOf(t, "hl-alloc", n))

		setAllocatable(t, n, 8)
		e = waitState(t, r, "hl-alloc", n, v1alpha1.NodeHealthHolding)
		require.NotEmpty(t, e.StressRun)
		var run v1alpha1.StressRun
		u, err := framework.C.Dynamic.Resource(v1alpha1.StressRunResource).Get(context.Background(), e.StressRun, metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, fromUnstructured(u.Object, &run))
		assert.Equal(t, []string{n}, run.Spec.Nodes)
		assert.Equal(t, stressImage, run.Spec.Image)
		assert.Equal(t, v1alpha1.StressRunSucceeded, run.Status.Phase)
		waitTaint(t, n, true) // still out during the hold time
		e = waitState(t, r, "hl-alloc", n, v1alpha1.NodeHealthHealthy)
		waitTaint(t, n, false)
		require.NotNil(t, e)
		assert.NotNil(t, e.ReturnedAt)
		assert.Equal(t, []v1alpha1.NodeHealthState{"Quarantined", "Rechecking", "Holding", "Healthy"}, states(e.History))
		r.waitGauge(t, "litepool_pool_quarantined_nodes", "hl-alloc", "", 0)
		assert.Contains(t, nodeEvents(t, n), "HealthHealthy")
	})

	t.Run("a node that fails the re-check stays out", func(t *testing.T) {
		nodes := healthPool(t, "hl-fail", 4, fast(50))
		n := nodes[1]
		agent.failOn(n)
		setAllocatable(t, n, 6)
		waitState(t, r, "hl-fail", n, v1alpha1.NodeHealthQuarantined)
		setAllocatable(t, n, 8)
		e := waitState(t, r, "hl-fail", n, v1alpha1.NodeHealthHeldOut)
		assert.Equal(t, policy.ReasonRecheckFailed, e.Reason)
		assert.Contains(t, e.Message, "failed the re-check (stress run "+e.StressRun+")")
		waitTaint(t, n, true)
		r.waitGauge(t, "litepool_pool_health_held_out_nodes", "hl-fail", `reason="RecheckFailed"`, 1)
	})

	t.Run("a listed node condition triggers the same loop", func(t *testing.T) {
		nodes := healthPool(t, "hl-cond", 4, fast(50))
		n := nodes[2]
		setCondition(t, n, "KernelDeadlock", corev1.ConditionTrue)
		e := waitState(t, r, "hl-cond", n, v1alpha1.NodeHealthQuarantined)
		assert.Equal(t, "Condition/KernelDeadlock", e.Reason)
		assert.Contains(t, e.Message, "node condition KernelDeadlock=True (TestProblem: played by the e2e test)")
		waitTaint(t, n, true)
		setCondition(t, n, "KernelDeadlock", corev1.ConditionFalse)
		waitState(t, r, "hl-cond", n, v1alpha1.NodeHealthHealthy)
		waitTaint(t, n, false)

		setCondition(t, nodes[3], "SomeOtherCondition", corev1.ConditionTrue)
		time.Sleep(2 * time.Second) // a negative: give the loop time to (not) act
		assert.Equal(t, v1alpha1.NodeHealthState(""), stateOf(t, "hl-cond", nodes[3]), "a condition not in the list is no signal")
	})

	// 25% of 4 nodes is 1: the second faulty node stays in service, the pool says the
	// breaker tripped, the gauge the alert reads is 1.
	t.Run("the breaker quarantines only up to the share and raises the alert", func(t *testing.T) {
		nodes := healthPool(t, "hl-brk", 4, fast(25))
		setAllocatable(t, nodes[0], 7)
		waitState(t, r, "hl-brk", nodes[0], v1alpha1.NodeHealthQuarantined)
		setAllocatable(t, nodes[1], 7)
		e := waitState(t, r, "hl-brk", nodes[1], v1alpha1.NodeHealthWaiting)
		assert.Contains(t, e.Message, "the circuit breaker allows at most 25% of the pool out")
		assert.Nil(t, quarantineTaint(t, nodes[1]), "left in service")
		p := pool(t, "hl-brk")
		assert.True(t, p.Status.BreakerTripped)
		assert.Equal(t, int32(1), p.Status.QuarantinedNodes)
		r.waitGauge(t, "litepool_pool_health_breaker_tripped", "hl-brk", "", 1)
		assert.Contains(t, nodeEvents(t, nodes[1]), "HealthBreakerTripped")

		// The first node recovers: the breaker lets the second one out.
		setAllocatable(t, nodes[0], 8)
		waitState(t, r, "hl-brk", nodes[1], v1alpha1.NodeHealthQuarantined)
		waitTaint(t, nodes[1], true)
		r.waitGauge(t, "litepool_pool_health_breaker_tripped", "hl-brk", "", 0)
	})

	t.Run("a node that faults twice within the window stays out until released by hand", func(t *testing.T) {
		nodes := healthPool(t, "hl-flap", 4, fast(50))
		n := nodes[0]
		setAllocatable(t, n, 7)
		waitState(t, r, "hl-flap", n, v1alpha1.NodeHealthQuarantined)
		setAllocatable(t, n, 8)
		waitState(t, r, "hl-flap", n, v1alpha1.NodeHealthHealthy)
		waitTaint(t, n, false)

		setAllocatable(t, n, 7)
		e := waitState(t, r, "hl-flap", n, v1alpha1.NodeHealthHeldOut)
		assert.Equal(t, policy.ReasonFlapping, e.Reason)
		waitTaint(t, n, true)
		r.waitGauge(t, "litepool_pool_health_held_out_nodes", "hl-flap", `reason="Flapping"`, 1)
		setAllocatable(t, n, 8)
		time.Sleep(3 * time.Second) // longer than the hold time: still out
		assert.Equal(t, v1alpha1.NodeHealthHeldOut, stateOf(t, "hl-flap", n))

		// A node that is not out cannot be released; the one held out is, by the verb's order in spec.health.release.
		res := framework.C.Litepool(t, "health", "release", nodes[1])
		assert.Equal(t, 1, res.ExitCode)
		assert.Contains(t, res.Stderr, "[H1] node "+nodes[1]+" is Healthy: only a node the health loop holds out")
		desc := framework.C.MustLitepool(t, "describe", "node", n)
		assert.Regexp(t, `Health:\n\s+State:\s+HeldOut\n\s+Reason:\s+Flapping\n`, desc)
		assert.Contains(t, desc, "Quarantined")
		listed := framework.C.MustLitepool(t, "get", "nodes", "--pool", "hl-flap")
		assert.Regexp(t, n+`\s.*HeldOut \(Flapping\)`, listed)
		out := framework.C.MustLitepool(t, "health", "preview", "hl-flap")
		assert.Regexp(t, n+`\s+HeldOut\s+HeldOut\s+-\s+<none>`, out)
		out = framework.C.MustLitepool(t, "health", "release", n)
		assert.Contains(t, out, "node/"+n+" released (pool hl-flap; the controller applies it)")
		e = waitState(t, r, "hl-flap", n, v1alpha1.NodeHealthHealthy)
		waitTaint(t, n, false)
		if e != nil { // the next pass forgets a released node: a later fault is an ordinary one
			assert.Equal(t, policy.ReasonReleasedByHand, e.Reason)
		}
		assert.Contains(t, nodeEvents(t, n), "HealthReleaseRequested")
		assert.Contains(t, nodeEvents(t, n), "HealthHealthy")
		r.waitGauge(t, "litepool_pool_health_held_out_nodes", "hl-flap", `reason="Flapping"`, 0)

		// A hold by hand: out until released.
		out = framework.C.MustLitepool(t, "health", "hold", nodes[2], "--reason", "fan noise")
		assert.Contains(t, out, "node/"+nodes[2]+" held out")
		e = waitState(t, r, "hl-flap", nodes[2], v1alpha1.NodeHealthHeldOut)
		assert.Equal(t, policy.ReasonHeldByHand, e.Reason)
		assert.Contains(t, e.Message, ": fan noise")
		waitTaint(t, nodes[2], true)
	})
}

func states(h []v1alpha1.NodeHealthTransition) []v1alpha1.NodeHealthState {
	var out []v1alpha1.NodeHealthState
	for _, x := range h {
		out = append(out, x.State)
	}
	return out
}
