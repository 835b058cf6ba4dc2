package attack

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Rows of issue 41 item 2: health by domain (spec.health.domainOutPercent).
const domainRack = "example.com/rack"

// domainHealthPool makes pool name with a rack topology, domainOutPercent 50 and no
// breaker to speak of (100%: only the domain rule's own guards are played), and its
// members by rack ("" for a member in no rack).
func domainHealthPool(t *testing.T, name string, racks map[string][]string) {
	t.Helper()
	nodeWorkFixture(t)
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Topology: &v1alpha1.TopologySpec{Levels: []string{domainRack}},
			Health: &v1alpha1.HealthPolicy{Mode: v1alpha1.HealthEnforce, DomainOutPercent: 50, MaxQuarantinedPercent: 100,
				HoldTime: &metav1.Duration{Duration: time.Second}, Recheck: &v1alpha1.RecheckSpec{Definition: "npu-check"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for rack, nodes := range racks {
		for _, n := range nodes {
			framework.CreateReadyNode(t, framework.C.Kube, n, name)
			if rack != "" {
				setRack(t, framework.C.Kube.CoreV1().Nodes().Patch, n, rack)
			}
		}
	}
}

type nodePatch func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error)

func setRack(t *testing.T, patch nodePatch, node, rack string) {
	t.Helper()
	_, err := patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+domainRack+`":"`+rack+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "topology labels are their agents': never refused (%s)", node)
}

// domainHeld are the nodes carrying the domain rule's taint.
func domainHeld(t *testing.T, nodes ...string) []string {
	var out []string
	for _, name := range nodes {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		if policy.DomainHeldTaint(n) {
			out = append(out, name)
		}
	}
	return out
}

// syncOn faults node (a member in no rack, so it counts toward no domain) and waits for
// its quarantine: the pass that tainted it read every member after the writes made
// before, then clears the fault.
func syncOn(t *testing.T, pool, node string) {
	t.Helper()
	setCondition(t, node, "KernelDeadlock", corev1.ConditionTrue)
	waitQuarantined(t, node, true)
	setCondition(t, node, "KernelDeadlock", corev1.ConditionFalse)
}

// attackDomainOutByLabelMove: rack a has 1 fault of its 4 members, rack b 1 of 3. The
// node labeller moves 2 healthy members out of a (1 of 2 by the labels now), then a's
// faulted member into b (2 of 4 by the labels). Neither rack goes out: a fault counts
// toward the rack its episode began in, and with that rack's size then.
func attackDomainOutByLabelMove(t *testing.T) {
	const pool = "at-dom-lbl"
	a := []string{"at-dom-lbl-a1", "at-dom-lbl-a2", "at-dom-lbl-a3", "at-dom-lbl-a4"}
	b := []string{"at-dom-lbl-b1", "at-dom-lbl-b2", "at-dom-lbl-b3"}
	sync := "at-dom-lbl-x1"
	domainHealthPool(t, pool, map[string][]string{"a": a, "b": b, "": {sync}})
	all := append(append(append([]string{}, a...), b...), sync)
	framework.WaitInService(t, framework.C.Kube, all...)
	setCondition(t, a[0], "KernelDeadlock", corev1.ConditionTrue)
	setCondition(t, b[0], "KernelDeadlock", corev1.ConditionTrue)
	waitQuarantined(t, a[0], true)
	waitQuarantined(t, b[0], true)
	assert.Equal(t, "a", waitEntry(t, pool, a[0], "recorded in rack a", func(e *v1alpha1.NodeHealthStatus) bool { return e != nil && e.Domain != "" }).Domain)

	labeller := as(t, nodePatcher).CoreV1().Nodes().Patch
	setRack(t, labeller, a[1], "z")
	setRack(t, labeller, a[2], "z")
	syncOn(t, pool, sync)
	assert.Empty(t, domainHeld(t, all...), "rack a by its labels: 1 fault of 2; its fault began with 4 members")
	setRack(t, labeller, a[0], "b")
	syncOn(t, pool, sync)
	assert.Empty(t, domainHeld(t, all...), "rack b by its labels: 2 faults of 4; a1's began in rack a")
	for _, n := range []string{a[1], a[2], a[3], b[1], b[2]} {
		assert.False(t, quarantined(t, n), "litepool tainted %s in answer to a label move", n)
	}
}

// attackDomainOutByStatus: a pools/status writer writes entries for a rack of 4: two
// Quarantined with a signal's reason and the rack's domain, two DomainOut; then, while
// the two are out as Unbacked quarantines, rewrites their reasons to the signal's. The
// rack never goes out, and every member is back in service in the end.
func attackDomainOutByStatus(t *testing.T) {
	const pool = "at-dom-st"
	a := []string{"at-dom-st-a1", "at-dom-st-a2", "at-dom-st-a3", "at-dom-st-a4"}
	domainHealthPool(t, pool, map[string][]string{"a": a})
	framework.WaitInService(t, framework.C.Kube, a...)
	forged := func(n, state, reason string) map[string]any {
		return forgedEntry(n, map[string]any{"state": state, "reason": reason, "domain": "a", "domainSize": 4})
	}
	forgeStatus(t, pool, forged(a[0], "Quarantined", "DeviceUnhealthy"), forged(a[1], "Quarantined", "DeviceUnhealthy"),
		forged(a[2], "DomainOut", policy.ReasonDomainHeldOut), forged(a[3], "DomainOut", policy.ReasonDomainHeldOut))
	rewritten, sawOut := false, false
	err := wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		require.Empty(t, domainHeld(t, a...), "the rack went out on the Pool's status alone")
		out := 0
		for _, n := range a {
			if quarantined(t, n) {
				out++
			}
		}
		sawOut = sawOut || out > 0
		if out > 0 && !rewritten {
			rewriteReasons(t, pool, "DeviceUnhealthy")
			rewritten = true
		}
		return sawOut && rewritten && out == 0, nil
	})
	require.NoError(t, err, "the honoured entries never returned (rewritten %v)\n%s", rewritten, framework.W.Log)
}

// rewriteReasons writes reason into every out entry of pool, as a pools/status writer.
func rewriteReasons(t *testing.T, pool, reason string) {
	t.Helper()
	p, err := poolclient.New(framework.C.Dynamic).Get(ctx, pool)
	require.NoError(t, err)
	var entries []map[string]any
	for _, e := range p.Status.NodeHealth {
		if policy.CountsAsOut(e.State) {
			e.Reason = reason
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&e)
		require.NoError(t, err)
		entries = append(entries, m)
	}
	forgeStatus(t, pool, entries...)
}
