package stress

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

const clique = "nvidia.com/gpu.clique"

// rackNode is a ready member of pool-a in NVLink clique rack ("" for none).
func rackNode(name, rack string) *corev1.Node {
	n := readyNode(name)
	if rack != "" {
		n.Labels[clique] = rack
	}
	return n
}

func rackPool(topology bool) *v1alpha1.Pool {
	p := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "pool-a"}}
	if topology {
		p.Spec.Topology = &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA}
	}
	return p
}

func TestByDomain(t *testing.T) {
	topo, err := policy.ResolveTopology(&v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA})
	require.NoError(t, err)
	members := []*corev1.Node{rackNode("a1", "a"), rackNode("a2", "a"), rackNode("b1", "b"), rackNode("b2", "b"), rackNode("b3", "b"), rackNode("lone", "")}
	for _, tc := range []struct {
		name    string
		skip    map[string]string // the node's own reason
		targets map[string]string
		domains []v1alpha1.StressDomainResult
	}{
		{name: "all idle: both domains tested, the node outside skipped",
			targets: map[string]string{"lone": "outside every domain (lacks a label of nvidia.com/gpu.clique)"},
			domains: []v1alpha1.StressDomainResult{{Domain: "a", Members: []string{"a1", "a2"}, Outcome: v1alpha1.StressOutcomePending},
				{Domain: "b", Members: []string{"b1", "b2", "b3"}, Outcome: v1alpha1.StressOutcomePending}}},
		{name: "one member busy, another cordoned: its domain skipped whole, naming both",
			skip: map[string]string{"b2": "busy: 1 workload pod(s): team/train", "b3": "cordoned"},
			targets: map[string]string{"lone": "outside every domain (lacks a label of nvidia.com/gpu.clique)",
				"b1": "domain b not idle: b2 busy: 1 workload pod(s): team/train; b3 cordoned",
				"b2": "domain b not idle: b2 busy: 1 workload pod(s): team/train; b3 cordoned",
				"b3": "domain b not idle: b2 busy: 1 workload pod(s): team/train; b3 cordoned"},
			domains: []v1alpha1.StressDomainResult{{Domain: "a", Members: []string{"a1", "a2"}, Outcome: v1alpha1.StressOutcomePending},
				{Domain: "b", Members: []string{"b1", "b2", "b3"}, Outcome: v1alpha1.StressOutcomeSkipped, Message: "not idle: b2 busy: 1 workload pod(s): team/train; b3 cordoned"}}},
		{name: "a busy node outside every domain changes no domain",
			skip:    map[string]string{"lone": "NotReady"},
			targets: map[string]string{"lone": "outside every domain (lacks a label of nvidia.com/gpu.clique)"},
			domains: []v1alpha1.StressDomainResult{{Domain: "a", Members: []string{"a1", "a2"}, Outcome: v1alpha1.StressOutcomePending},
				{Domain: "b", Members: []string{"b1", "b2", "b3"}, Outcome: v1alpha1.StressOutcomePending}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in, want []Target
			for _, n := range members {
				in = append(in, Target{Node: n.Name, Skip: tc.skip[n.Name]})
				want = append(want, Target{Node: n.Name, Skip: tc.targets[n.Name]})
			}
			got, domains := ByDomain(topo, members, in)
			assert.Equal(t, want, got)
			assert.Equal(t, tc.domains, domains)
		})
	}
}

// A run by domain: the busy member's domain is skipped whole; the idle domain's members
// run each test together (hccs starts on none until npu ended on both), and one failed
// member marks that node degraded and the domain's result failed, naming it.
func TestReconcileByDomainRunsIdleDomainsTogether(t *testing.T) {
	f := newFixture(t, rackNode("a1", "a"), rackNode("a2", "a"), rackNode("b1", "b"), rackNode("b2", "b"), rackNode("lone", ""), busyPod("b2"))
	require.NoError(t, f.cr.Create(context.Background(), rackPool(true)))
	run := testRun()
	run.Spec.Domains = true
	f.create(run)

	f.reconcile("pool-a-1")
	got := f.run("pool-a-1")
	require.Equal(t, v1alpha1.StressRunRunning, got.Status.Phase)
	assert.Equal(t, []v1alpha1.StressDomainResult{{Domain: "a", Members: []string{"a1", "a2"}, Outcome: v1alpha1.StressOutcomePending},
		{Domain: "b", Members: []string{"b1", "b2"}, Outcome: v1alpha1.StressOutcomeSkipped, Message: "not idle: b2 busy: 1 workload pod(s): team/train"}}, got.Status.Domains)
	assert.Equal(t, []int32{2, 3}, []int32{got.Status.Total, got.Status.Skipped})
	assert.Equal(t, "testing 2 node(s) in 1 domain(s) of pool pool-a in namespace litepool-system", got.Status.Conditions[0].Message)

	f.reconcile("pool-a-1")
	assert.ElementsMatch(t, []string{ns + "/pool-a-1-a1-npu", ns + "/pool-a-1-a2-npu"}, f.pods(), "nothing on the busy domain, nor outside every domain")
	f.end("pool-a-1-a1-npu", "")
	f.reconcile("pool-a-1")
	assert.NotContains(t, f.pods(), ns+"/pool-a-1-a1-hccs", "a1's hccs waits for a2's npu: the domain runs each test together")
	assert.Equal(t, v1alpha1.StressOutcomeRunning, f.run("pool-a-1").Status.Domains[0].Outcome)

	f.end("pool-a-1-a2-npu", "")
	f.reconcile("pool-a-1")
	assert.Subset(t, f.pods(), []string{ns + "/pool-a-1-a1-hccs", ns + "/pool-a-1-a2-hccs"})
	f.end("pool-a-1-a1-hccs", "hccs link 3 down")
	f.end("pool-a-1-a2-hccs", "")
	f.reconcile("pool-a-1")

	got = f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, got.Status.Phase)
	assert.Equal(t, v1alpha1.StressDomainResult{Domain: "a", Members: []string{"a1", "a2"}, Outcome: v1alpha1.StressOutcomeFailed,
		FailedMembers: []string{"a1"}, Message: "1 of 2 member(s) failed: a1"}, got.Status.Domains[0])
	assert.Equal(t, v1alpha1.StressOutcomeSkipped, got.Status.Domains[1].Outcome)
	assert.Equal(t, "1 node(s) failed: a1; 1 domain(s) failed: a", got.Status.Conditions[1].Message)
	assert.Equal(t, []string{"a"}, FailedDomains(&got.Status))
	assert.Equal(t, policy.HealthDegraded, f.node("a1").Labels[policy.LabelHealth])
	assert.Equal(t, policy.HealthHealthy, f.node("a2").Labels[policy.LabelHealth])
	for _, n := range []string{"b1", "b2", "lone"} {
		assert.NotContains(t, f.node(n).Labels, policy.LabelHealth, "%s was not tested", n)
	}
}

// A member that fails the first test stops its domain: the other members run no
// further test (NotRun, naming it) and are not judged on tests they did not run.
func TestReconcileByDomainStopsADomainWhoseMemberFailed(t *testing.T) {
	f := newFixture(t, rackNode("a1", "a"), rackNode("a2", "a"))
	require.NoError(t, f.cr.Create(context.Background(), rackPool(true)))
	run := testRun()
	run.Spec.Domains = true
	f.create(run)
	f.reconcile("pool-a-1")
	f.reconcile("pool-a-1")
	f.end("pool-a-1-a1-npu", "npu 3 ecc errors")
	f.end("pool-a-1-a2-npu", "")
	f.reconcile("pool-a-1")

	got := f.run("pool-a-1")
	require.Equal(t, v1alpha1.StressRunFailed, got.Status.Phase, "%+v", got.Status)
	assert.Equal(t, v1alpha1.StressNodeResult{Node: "a2", Test: "hccs", Outcome: v1alpha1.StressOutcomeNotRun, Message: "domain a: a1 failed first"}, got.Status.Results[3])
	assert.Equal(t, []string{"a1"}, got.Status.Domains[0].FailedMembers)
	assert.NotContains(t, f.pods(), ns+"/pool-a-1-a2-hccs")
	assert.Equal(t, policy.HealthDegraded, f.node("a1").Labels[policy.LabelHealth])
	assert.NotContains(t, f.node("a2").Labels, policy.LabelHealth, "a2 ran npu only: not judged")
}

// A pool that lost its topology after the run was admitted: the run fails at its start
// with T4's reason, and creates nothing.
func TestReconcileByDomainWithoutTopologyFails(t *testing.T) {
	f := newFixture(t, rackNode("a1", "a"))
	require.NoError(t, f.cr.Create(context.Background(), rackPool(false)))
	run := testRun()
	run.Spec.Domains = true
	f.create(run)
	f.reconcile("pool-a-1")
	got := f.run("pool-a-1")
	assert.Equal(t, v1alpha1.StressRunFailed, got.Status.Phase)
	assert.Equal(t, "NoDomains", got.Status.Conditions[1].Reason)
	assert.Contains(t, got.Status.Conditions[1].Message, `[T4] spec.domains tests a pool by unit domain, and pool "pool-a" has no topology`)
	assert.Empty(t, got.Status.Results)
	assert.Empty(t, f.pods())
}
