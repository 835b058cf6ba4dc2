package health

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// domainPool is pool p1 with a rack topology, domainOutPercent 50 and the breaker at
// breaker%, over racks A (a1-a4) and B (b1-b4).
func domainPool(t *testing.T, breaker int32) (*Reconciler, *kubefake.Clientset) {
	var nodes []*corev1.Node
	for _, rack := range []string{"a", "b"} {
		for i := 1; i <= 4; i++ {
			n := member(rack+string(rune('0'+i)), "8")
			n.Labels["rack"] = rack
			nodes = append(nodes, n)
		}
	}
	r, kube := setup(t, []string{"registry.example.com/"}, nodes...)
	ctx := context.Background()
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	pool.Spec.Topology = &v1alpha1.TopologySpec{Levels: []string{"rack"}}
	pool.Spec.Health.DomainOutPercent, pool.Spec.Health.MaxQuarantinedPercent = 50, breaker
	require.NoError(t, r.Client.Update(ctx, &pool))
	return r, kube
}

// editNode changes node name in both the controller's cache and the API server.
func editNode(t *testing.T, r *Reconciler, kube *kubefake.Clientset, name string, edit func(*corev1.Node)) {
	ctx := context.Background()
	var cached corev1.Node
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: name}, &cached))
	live, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	cached.Spec.Taints = live.Spec.Taints
	edit(&cached)
	require.NoError(t, r.Client.Update(ctx, &cached))
	edit(&cached) // Update wrote back the stored status
	require.NoError(t, r.Client.Status().Update(ctx, &cached))
	live.Labels, live.Status, live.Spec.Taints = cached.Labels, cached.Status, cached.Spec.Taints
	_, err = kube.CoreV1().Nodes().Update(ctx, live, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// settle reconciles p1, then lets the cache catch up with the taints the loop set.
func settle(t *testing.T, r *Reconciler, kube *kubefake.Clientset) {
	_, err := r.Reconcile(context.Background(), poolP1)
	require.NoError(t, err)
	for _, n := range []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"} {
		editNode(t, r, kube, n, func(*corev1.Node) {})
	}
}

func faulty(n *corev1.Node)  { n.Status.Allocatable["huawei.com/Ascend910"] = resource.MustParse("7") }
func healthy(n *corev1.Node) { n.Status.Allocatable["huawei.com/Ascend910"] = resource.MustParse("8") }

// taintsByReason are the members carrying the quarantine taint, by its value.
func taintsByReason(t *testing.T, kube *kubefake.Clientset) map[string][]string {
	out := map[string][]string{}
	nodes, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		if q := policy.QuarantineTaintOf(&n); q != nil {
			out[q.Value] = append(out[q.Value], n.Name)
		}
	}
	return out
}

func entryOf(t *testing.T, r *Reconciler, node string) *v1alpha1.NodeHealthStatus {
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(context.Background(), client.ObjectKey{Name: "p1"}, &pool))
	for i := range pool.Status.NodeHealth {
		if pool.Status.NodeHealth[i].Node == node {
			return &pool.Status.NodeHealth[i]
		}
	}
	return nil
}

// 2 of rack A's 4 members fault: A is held out whole; the breaker (50% of 8: 4) keeps
// rack B's faults from taking B out too; A returns whole once a member is back.
func TestDomainHeldOutWholeWithinTheBreaker(t *testing.T) {
	r, kube := domainPool(t, 50)
	editNode(t, r, kube, "a1", faulty)
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a1"}}, taintsByReason(t, kube), "1 of 4: below 50%")

	editNode(t, r, kube, "a2", faulty)
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a1", "a2"}, "DomainHeldOut": {"a3", "a4"}}, taintsByReason(t, kube))
	e := entryOf(t, r, "a3")
	require.NotNil(t, e)
	assert.Equal(t, v1alpha1.NodeHealthDomainOut, e.State)
	assert.Equal(t, policy.ReasonDomainHeldOut, e.Reason)
	assert.Contains(t, e.Message, "domain a has 2 of 4 members out")
	assert.Equal(t, "a", entryOf(t, r, "a1").Domain)
	assert.Equal(t, int32(4), entryOf(t, r, "a1").DomainSize)
	settle(t, r, kube) // and stays so
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a1", "a2"}, "DomainHeldOut": {"a3", "a4"}}, taintsByReason(t, kube))
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(context.Background(), client.ObjectKey{Name: "p1"}, &pool))
	assert.Equal(t, int32(4), pool.Status.QuarantinedNodes, "the held members count as out")

	// Rack B's faults: the breaker is full with rack A, so they wait; B is not held.
	editNode(t, r, kube, "b1", faulty)
	editNode(t, r, kube, "b2", faulty)
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a1", "a2"}, "DomainHeldOut": {"a3", "a4"}}, taintsByReason(t, kube))
	assert.Equal(t, v1alpha1.NodeHealthWaiting, entryOf(t, r, "b1").State)
	require.NoError(t, r.Client.Get(context.Background(), client.ObjectKey{Name: "p1"}, &pool))
	assert.True(t, pool.Status.BreakerTripped)

	// a1's device comes back: it goes to its re-check (still out), A stays held.
	editNode(t, r, kube, "a1", healthy)
	settle(t, r, kube)
	assert.Equal(t, v1alpha1.NodeHealthRechecking, entryOf(t, r, "a1").State)
	assert.Contains(t, taintsByReason(t, kube)["DomainHeldOut"], "a3", "a member re-checking is still out")
}

// The domain comes back whole when its members return, and the rule off releases it.
func TestDomainComesBackWhole(t *testing.T) {
	r, kube := domainPool(t, 50)
	ctx := context.Background()
	editNode(t, r, kube, "a1", faulty)
	editNode(t, r, kube, "a2", faulty)
	settle(t, r, kube)
	require.Equal(t, []string{"a3", "a4"}, taintsByReason(t, kube)["DomainHeldOut"])
	// An operator releases a1 (its quarantine began before now): 1 of 4 is out.
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	pool.Spec.Health.Release = []v1alpha1.NodeRelease{{Node: "a1", At: metav1.Time{Time: now}}}
	require.NoError(t, r.Client.Update(ctx, &pool))
	editNode(t, r, kube, "a1", healthy)
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a2"}}, taintsByReason(t, kube), "back whole but for its own faulty member")
	e := entryOf(t, r, "a3")
	require.NotNil(t, e)
	assert.Equal(t, v1alpha1.NodeHealthHealthy, e.State)
	assert.Equal(t, policy.ReasonDomainReturned, e.Reason)
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a2"}}, taintsByReason(t, kube))
	assert.Nil(t, entryOf(t, r, "a3"), "a returned member's entry is dropped on the next pass, as any healthy one")

	// a1 faults again: a is out whole again; then the rule is turned off: it returns.
	editNode(t, r, kube, "a1", faulty)
	settle(t, r, kube)
	require.Equal(t, []string{"a3", "a4"}, taintsByReason(t, kube)["DomainHeldOut"])
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	pool.Spec.Health.DomainOutPercent = 0
	require.NoError(t, r.Client.Update(ctx, &pool))
	settle(t, r, kube)
	assert.Empty(t, taintsByReason(t, kube)["DomainHeldOut"])
}

// Moving a faulted member into another rack carries no fault there: rack B, with 1 of
// its 4 out, does not go out when a2 (faulted in A) is labelled into it.
func TestALabelMoveCarriesNoFault(t *testing.T) {
	r, kube := domainPool(t, 100)
	editNode(t, r, kube, "a2", faulty)
	editNode(t, r, kube, "b1", faulty)
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a2", "b1"}}, taintsByReason(t, kube))
	editNode(t, r, kube, "a2", func(n *corev1.Node) { n.Labels["rack"] = "b" })
	settle(t, r, kube)
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a2", "b1"}}, taintsByReason(t, kube), "b: 2 of 5 by labels, but a2's fault began in a")
	// Moving healthy members out of a rack with a fault does not raise its share
	// either: the fault keeps the size its rack had.
	editNode(t, r, kube, "b3", func(n *corev1.Node) { n.Labels["rack"] = "c" })
	editNode(t, r, kube, "b4", func(n *corev1.Node) { n.Labels["rack"] = "c" })
	settle(t, r, kube)
	assert.Equal(t, map[string][]string{"DeviceUnhealthy": {"a2", "b1"}}, taintsByReason(t, kube), "b: 1 fault of the 4 it had")
}

// A writer of pools/status cannot make a domain go out: entries alone (Quarantined with
// a signal's reason, DomainOut) are memory, and an Unbacked episode's reason rewritten
// into a signal's stays Unbacked.
func TestStatusEntriesCannotTakeADomainOut(t *testing.T) {
	r, kube := domainPool(t, 100)
	ctx := context.Background()
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	at := metav1.Time{Time: now}
	pool.Status.NodeHealth = []v1alpha1.NodeHealthStatus{
		{Node: "a1", State: v1alpha1.NodeHealthQuarantined, Reason: "DeviceUnhealthy", Since: at, Domain: "a", DomainSize: 2},
		{Node: "a2", State: v1alpha1.NodeHealthQuarantined, Reason: "DeviceUnhealthy", Since: at, Domain: "a", DomainSize: 2},
		{Node: "a3", State: v1alpha1.NodeHealthDomainOut, Reason: policy.ReasonDomainHeldOut, Since: at, Domain: "a"},
	}
	require.NoError(t, r.Client.Status().Update(ctx, &pool))
	settle(t, r, kube)
	assert.Empty(t, taintsByReason(t, kube)["DomainHeldOut"], "memory alone: no domain hold")
	assert.ElementsMatch(t, []string{"a1", "a2"}, taintsByReason(t, kube)["Unbacked"], "within the breaker, honoured as Unbacked quarantines")

	// The writer rewrites both reasons into a signal's.
	for range 2 {
		require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
		for i := range pool.Status.NodeHealth {
			pool.Status.NodeHealth[i].Reason = "DeviceUnhealthy"
		}
		require.NoError(t, r.Client.Status().Update(ctx, &pool))
		settle(t, r, kube)
		assert.Empty(t, taintsByReason(t, kube)["DomainHeldOut"], "an Unbacked episode stays Unbacked while no signal shows")
		assert.ElementsMatch(t, []string{"a1", "a2"}, taintsByReason(t, kube)["Unbacked"])
	}
}

// The breaker counts a member NodeOut leaves out as quarantined from the start of the
// pass, whatever the Pool's status says: with d's entry removed by a pools/status
// writer, a new fault on a (first by name) waits instead of passing the breaker.
func TestTheBreakerCountsTheQuarantineTaint(t *testing.T) {
	r, kube := setup(t, []string{"registry.example.com/"}, member("a", "7"), member("b", "8"), member("c", "8"), member("d", "8"))
	editNode(t, r, kube, "d", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{policy.QuarantineTaint("DeviceUnhealthy")} })
	_, err := r.Reconcile(context.Background(), poolP1)
	require.NoError(t, err)
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(context.Background(), client.ObjectKey{Name: "p1"}, &pool))
	states := map[string]v1alpha1.NodeHealthState{}
	for _, e := range pool.Status.NodeHealth {
		states[e.Node] = e.State
	}
	assert.Equal(t, map[string]v1alpha1.NodeHealthState{"a": v1alpha1.NodeHealthWaiting, "d": v1alpha1.NodeHealthHeldOut}, states,
		"25%% of 4 is 1: d, tainted, fills the breaker")
	assert.Equal(t, int32(1), pool.Status.QuarantinedNodes)
}

// An episode that passed its re-check (Holding, reason Recovered, which an Unbacked
// episode reaches as well) no longer counts toward its domain: two members holding
// after their re-checks do not take their rack out.
func TestHoldingMembersDoNotTakeADomainOut(t *testing.T) {
	r, kube := domainPool(t, 100)
	ctx := context.Background()
	var pool v1alpha1.Pool
	require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
	at := metav1.Time{Time: now}
	for _, n := range []string{"a1", "a2"} {
		pool.Status.NodeHealth = append(pool.Status.NodeHealth, v1alpha1.NodeHealthStatus{Node: n, State: v1alpha1.NodeHealthHolding,
			Reason: policy.ReasonRecovered, Since: at, Domain: "a", DomainSize: 4})
		editNode(t, r, kube, n, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{policy.QuarantineTaint(policy.ReasonRecovered)} })
	}
	require.NoError(t, r.Client.Status().Update(ctx, &pool))
	settle(t, r, kube)
	settle(t, r, kube)
	assert.Empty(t, taintsByReason(t, kube)["DomainHeldOut"])
}
