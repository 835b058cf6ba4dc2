package upgrade

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

const cliqueLabel = "nvidia.com/gpu.clique"

// newRackWorld is pool p with a topology (NVIDIA preset) of racks × perRack nodes
// (rack-a-1, ...) and minNodes, and the rollout ro.
func newRackWorld(t *testing.T, ro *v1alpha1.DriverRollout, racks []string, perRack int, minNodes int32) *world {
	w := newWorld(t, ro)
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PoolSpec{MinNodes: minNodes,
		Topology: &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA}}}
	require.NoError(t, w.c.Create(context.Background(), pool))
	for _, r := range racks {
		for i := 1; i <= perRack; i++ {
			n := testNode(fmt.Sprintf("rack-%s-%d", r, i))
			n.Labels[cliqueLabel] = "uuid." + r
			_, err := w.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	return w
}

func byDomainRollout(name string, k int32) *v1alpha1.DriverRollout {
	ro := testRollout(name, 1)
	ro.Spec.MaxUnavailable, ro.Spec.MaxUnavailableDomains = nil, ptr.To(k)
	return ro
}

// cordonedRacks are the racks with a cordoned member now.
func (w *world) cordonedRacks() []string {
	list, err := w.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(w.t, err)
	seen := map[string]bool{}
	var out []string
	for _, n := range list.Items {
		if r := n.Labels[cliqueLabel]; n.Spec.Unschedulable && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// runToEnd reconciles, alternately with two reconcilers (a leader change at every
// pass: all state is in the rollout's status), completing installers, a minute a
// pass, and returns the racks out after each pass.
func (w *world) runToEnd(name string) [][]string {
	a, b := w.reconciler(), w.reconciler()
	var out [][]string
	for i := 0; i < 80 && w.rollout(name).Status.Phase != v1alpha1.RolloutSucceeded; i++ {
		r := a
		if i%2 == 1 {
			r = b
		}
		w.reconcile(r, name)
		out = append(out, w.cordonedRacks())
		w.playInstallers()
		w.clock.Step(time.Minute)
	}
	ro := w.rollout(name)
	require.Equal(w.t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	return out
}

func TestReconcileRollsByDomainEachDomainOutOnce(t *testing.T) {
	racks := []string{"a", "b", "c"}
	w := newRackWorld(t, byDomainRollout("r", 1), racks, 3, 1)
	history := w.runToEnd("r")
	ro := w.rollout("r")
	// At most one rack out at a time, and each rack out in one stretch.
	var order []string
	for _, out := range history {
		require.LessOrEqual(t, len(out), 1, "more than maxUnavailableDomains racks out: %v", out)
		if len(out) == 1 && (len(order) == 0 || order[len(order)-1] != out[0]) {
			order = append(order, out[0])
		}
	}
	assert.Equal(t, []string{"uuid.a", "uuid.b", "uuid.c"}, order, "each rack out once, in order")
	assert.Equal(t, "9/9", ro.Status.Progress)
	require.Len(t, ro.Status.Domains, 3)
	for _, d := range ro.Status.Domains {
		assert.Equal(t, policy.RolloutDomainDone, d.State, d.Name)
		assert.Equal(t, int32(3), d.Done, d.Name)
		assert.Positive(t, d.UnavailableSeconds, d.Name)
	}
	require.NotNil(t, ro.Status.StartTime)
	require.NotNil(t, ro.Status.CompletionTime)
	assert.Equal(t, map[string]int{"rack-a-1": 1, "rack-a-2": 1, "rack-a-3": 1, "rack-b-1": 1, "rack-b-2": 1, "rack-b-3": 1,
		"rack-c-1": 1, "rack-c-2": 1, "rack-c-3": 1}, w.jobsPerNode())
}

// The same pool node by node with maxUnavailable 1 breaks every rack three times: its
// domain-unavailable time and its wall time are both higher than by domain.
func TestRolloutByDomainCostsLessDomainTimeThanNodeByNode(t *testing.T) {
	racks := []string{"a", "b", "c"}
	byNode := newRackWorld(t, testRollout("n", 1), racks, 3, 1)
	byNode.runToEnd("n")
	byDomain := newRackWorld(t, byDomainRollout("d", 1), racks, 3, 1)
	byDomain.runToEnd("d")
	n, d := byNode.rollout("n").Status, byDomain.rollout("d").Status
	t.Logf("node by node: wall %s, domain-unavailable %ds; by domain: wall %s, domain-unavailable %ds",
		n.CompletionTime.Sub(n.StartTime.Time), n.DomainUnavailableSeconds, d.CompletionTime.Sub(d.StartTime.Time), d.DomainUnavailableSeconds)
	assert.Less(t, d.DomainUnavailableSeconds, n.DomainUnavailableSeconds)
	assert.True(t, d.CompletionTime.Sub(d.StartTime.Time) < n.CompletionTime.Sub(n.StartTime.Time))
}

// minNodes is a floor on available nodes: with 2 racks of 3 and minNodes 3, a second
// rack never goes while one is out, whatever maxUnavailableDomains allows.
func TestRolloutByDomainKeepsMinNodes(t *testing.T) {
	w := newRackWorld(t, byDomainRollout("r", 2), []string{"a", "b"}, 3, 3)
	for _, out := range w.runToEnd("r") {
		assert.LessOrEqual(t, len(out), 1, "a second rack out would leave fewer than minNodes available: %v", out)
	}
}

// A rollout by domain of a pool without a topology (made while the webhook was away)
// does not start: U6 names the field.
func TestRolloutByDomainWithoutTopologyDoesNotStart(t *testing.T) {
	w := newWorld(t, byDomainRollout("r", 1), "n1", "n2")
	w.reconcile(w.reconciler(), "r")
	ro := w.rollout("r")
	assert.Equal(t, v1alpha1.RolloutFailed, ro.Status.Phase)
	assert.Contains(t, ro.Status.Message, "[U6] spec.maxUnavailableDomains applies to a pool with a topology")
	assert.Empty(t, ro.Status.Nodes)
	assert.Zero(t, w.unschedulable())
}

// A writer of node labels who merges every rack into one after the rollout started
// (the topology labels are claims) gets nothing: each node's domain was fixed when the
// rollout started, so still one rack at a time goes out.
func TestRolloutByDomainIgnoresDomainLabelsChangedAfterItsStart(t *testing.T) {
	w := newRackWorld(t, byDomainRollout("r", 1), []string{"a", "b", "c"}, 2, 1)
	r := w.reconciler()
	w.reconcile(r, "r")
	ctx := context.Background()
	list, err := w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	fixed := map[string]string{}
	for i := range list.Items {
		n := &list.Items[i]
		fixed[n.Name] = n.Labels[cliqueLabel]
		n.Labels[cliqueLabel] = "uuid.merged"
		_, err := w.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	for i := 0; i < 40 && w.rollout("r").Status.Phase != v1alpha1.RolloutSucceeded; i++ {
		w.reconcile(r, "r")
		nodes, err := w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		out := map[string]bool{}
		for _, n := range nodes.Items {
			if n.Spec.Unschedulable {
				out[fixed[n.Name]] = true
			}
		}
		require.LessOrEqual(t, len(out), 1, "racks out at once: %v", out)
		w.playInstallers()
		w.clock.Step(time.Minute)
	}
	ro := w.rollout("r")
	require.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	assert.Len(t, ro.Status.Domains, 3, "the domains the rollout started with")
}

// setPool changes the rollout's pool under it, as its editor would.
func (w *world) setPool(mutate func(*v1alpha1.Pool)) {
	w.t.Helper()
	var pool v1alpha1.Pool
	require.NoError(w.t, w.c.Get(context.Background(), client.ObjectKey{Name: "p"}, &pool))
	mutate(&pool)
	require.NoError(w.t, w.c.Update(context.Background(), &pool))
}

// pass reconciles once, completes the installers and moves the clock on; it returns
// the racks out after the reconcile.
func (w *world) pass(r *Reconciler, name string) []string {
	w.reconcile(r, name)
	out := w.cordonedRacks()
	w.playInstallers()
	w.clock.Step(time.Minute)
	return out
}

// U6 when the pool changes under a running rollout: minNodes raised past what a
// domain out leaves. The rack already out finishes (it is out once, not twice), then
// no other rack goes: the rollout stalls with the floor named, and goes on by itself
// once the floor allows it. The floor wins over the rollout, so admission does not
// refuse the raise: the planner reads the pool's minNodes at every pass.
func TestRolloutByDomainStallsWhenMinNodesIsRaisedUnderIt(t *testing.T) {
	w := newRackWorld(t, byDomainRollout("r", 1), []string{"a", "b", "c"}, 2, 1)
	r := w.reconciler()
	require.Equal(t, []string{"uuid.a"}, w.pass(r, "r"), "the first rack goes")
	w.setPool(func(p *v1alpha1.Pool) { p.Spec.MinNodes = 5 }) // 6 nodes: a rack out leaves 4
	for i := 0; i < 10; i++ {
		out := w.pass(r, "r")
		assert.NotContains(t, out, "uuid.b", "pass %d: a rack out would leave 4 available, below minNodes 5", i)
		assert.NotContains(t, out, "uuid.c", "pass %d", i)
	}
	ro := w.rollout("r")
	assert.Equal(t, v1alpha1.RolloutProgressing, ro.Status.Phase)
	assert.Equal(t, "2/6", ro.Status.Progress, "rack a finished")
	cond := meta.FindStatusCondition(ro.Status.Conditions, ConditionComplete)
	require.NotNil(t, cond)
	assert.Equal(t, ReasonStalled, cond.Reason)
	assert.Contains(t, cond.Message, "[U2] rollout r cannot start another domain: a whole domain out would leave fewer than pool p's minNodes 5 available")
	assert.Zero(t, w.unschedulable(), "nothing out while stalled")

	w.setPool(func(p *v1alpha1.Pool) { p.Spec.MinNodes = 4 })
	for _, out := range w.runToEnd("r") {
		assert.LessOrEqual(t, len(out), 1, "racks out at once: %v", out)
	}
}

// The pool's topology removed (or changed) under a running rollout by domain: the
// rollout keeps the domains it fixed at its start (status.nodes[].domain), so it still
// takes one rack out at a time and finishes; a topology is a claim about hardware that
// did not move.
func TestRolloutByDomainKeepsItsDomainsWhenTheTopologyIsRemoved(t *testing.T) {
	w := newRackWorld(t, byDomainRollout("r", 1), []string{"a", "b", "c"}, 2, 1)
	r := w.reconciler()
	require.Equal(t, []string{"uuid.a"}, w.pass(r, "r"))
	w.setPool(func(p *v1alpha1.Pool) { p.Spec.Topology = nil })
	for _, out := range w.runToEnd("r") {
		assert.LessOrEqual(t, len(out), 1, "racks out at once: %v", out)
	}
	ro := w.rollout("r")
	assert.Len(t, ro.Status.Domains, 3, "the domains the rollout started with")
	assert.Equal(t, "6/6", ro.Status.Progress)
}

// A domain returns whole, as it went out: members that validated wait, cordoned, for
// the member that validates last, and all come back in the same pass. (Before, each
// member was uncordoned as it validated: a gang scheduler saw the rack half back and
// could place work there that the last member's return did not expect.)
func TestRolloutByDomainReturnsADomainWhole(t *testing.T) {
	w := newRackWorld(t, byDomainRollout("r", 1), []string{"a", "b"}, 3, 1)
	r := w.reconciler()
	w.reconcile(r, "r") // rack a out
	w.playInstallers("rack-a-3")
	w.reconcile(r, "r") // a-1 and a-2 validate; a-3's driver is not there yet
	ro := w.rollout("r")
	states := map[string]string{}
	for _, n := range ro.Status.Nodes {
		states[n.Name] = n.State
		if n.Name == "rack-a-1" {
			assert.Contains(t, n.Message, "held out until rack-a-3 of domain uuid.a validate too")
		}
	}
	assert.Equal(t, string(policy.UpgradeUncordon), states["rack-a-1"])
	assert.Equal(t, string(policy.UpgradeValidate), states["rack-a-3"])
	for _, n := range []string{"rack-a-1", "rack-a-2", "rack-a-3"} {
		node, err := w.kube.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, node.Spec.Unschedulable, "%s stays out while rack-a-3 is", n)
	}

	node, err := w.kube.CoreV1().Nodes().Get(context.Background(), "rack-a-3", metav1.GetOptions{})
	require.NoError(t, err)
	node.Labels[policy.LabelDriverVersion] = "2.0" // the driver reports late
	_, err = w.kube.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{})
	require.NoError(t, err)
	w.reconcile(r, "r")
	for _, n := range w.rollout("r").Status.Nodes {
		if n.Domain == "uuid.a" {
			assert.Equal(t, string(policy.UpgradeDone), n.State, "%s back with its rack in one pass", n.Name)
		}
	}
	assert.NotContains(t, w.cordonedRacks(), "uuid.a")
	w.runToEnd("r")
}

type queuedNodes map[string]bool

func (q queuedNodes) QueuedNodes(context.Context) (map[string]bool, error) { return q, nil }

// A rack where a queue has just placed a gang (admitted, its pods not made yet) is
// busy: the idle rack goes first. Without it, the rack looked idle and went first,
// evicting the gang as it started (the Kueue e2e saw one Job placed 9 times).
func TestRolloutByDomainCountsQueuedWorkAsBusy(t *testing.T) {
	w := newRackWorld(t, byDomainRollout("r", 1), []string{"a", "b"}, 2, 1)
	r := w.reconciler()
	r.Queued = queuedNodes{"rack-a-1": true, "rack-a-2": true}
	require.Equal(t, []string{"uuid.b"}, w.pass(r, "r"), "the rack a queue placed work on goes last")
}
