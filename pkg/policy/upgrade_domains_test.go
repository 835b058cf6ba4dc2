package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// racks is a pool of racks a, b, c of two nodes each (a-1, a-2, ...), every node in
// the rollout at state, Ready and available.
func racks(state UpgradeState) ([]UpgradeNode, map[string]string) {
	var nodes []UpgradeNode
	domainOf := map[string]string{}
	for _, r := range []string{"a", "b", "c"} {
		for i := 1; i <= 2; i++ {
			name := fmt.Sprintf("%s-%d", r, i)
			nodes = append(nodes, UpgradeNode{Name: name, State: state, Ready: true})
			domainOf[name] = r
		}
	}
	return nodes, domainOf
}

func withNode(nodes []UpgradeNode, name string, f func(*UpgradeNode)) []UpgradeNode {
	for i := range nodes {
		if nodes[i].Name == name {
			f(&nodes[i])
		}
	}
	return nodes
}

func TestPlanDomainWave(t *testing.T) {
	started := func(n *UpgradeNode) { n.State, n.Unavailable = UpgradeInstall, true }
	done := func(n *UpgradeNode) { n.State = UpgradeDone }
	for _, tc := range []struct {
		name       string
		nodes      func() []UpgradeNode
		maxDomains int
		minNodes   int
		start      []string
		cont       []string
		noSlot     []string
		notReady   []string
	}{
		{name: "one domain whole, by name", nodes: func() []UpgradeNode { n, _ := racks(UpgradeRequired); return n },
			maxDomains: 1, minNodes: 1, start: []string{"a-1", "a-2"}, noSlot: []string{"b-1", "b-2", "c-1", "c-2"}},
		{name: "two domains at once", nodes: func() []UpgradeNode { n, _ := racks(UpgradeRequired); return n },
			maxDomains: 2, minNodes: 1, start: []string{"a-1", "a-2", "b-1", "b-2"}, noSlot: []string{"c-1", "c-2"}},
		{name: "minNodes holds: the second domain would leave 2 of 6", nodes: func() []UpgradeNode { n, _ := racks(UpgradeRequired); return n },
			maxDomains: 2, minNodes: 3, start: []string{"a-1", "a-2"}, noSlot: []string{"b-1", "b-2", "c-1", "c-2"}},
		{name: "idle domains before busy ones", nodes: func() []UpgradeNode {
			n, _ := racks(UpgradeRequired)
			return withNode(n, "a-2", func(n *UpgradeNode) { n.Busy = true })
		}, maxDomains: 1, minNodes: 1, start: []string{"b-1", "b-2"}, noSlot: []string{"a-1", "a-2", "c-1", "c-2"}},
		{name: "a domain in progress holds the slot", nodes: func() []UpgradeNode {
			n, _ := racks(UpgradeRequired)
			return withNode(withNode(n, "a-1", started), "a-2", started)
		}, maxDomains: 1, minNodes: 1, cont: []string{"a-1", "a-2"}, noSlot: []string{"b-1", "b-2", "c-1", "c-2"}},
		{name: "a half-done domain (resumed after a restart) finishes before another starts", nodes: func() []UpgradeNode {
			n, _ := racks(UpgradeRequired)
			return withNode(n, "b-1", done)
		}, maxDomains: 1, minNodes: 1, start: []string{"b-2"}, noSlot: []string{"a-1", "a-2", "c-1", "c-2"}},
		{name: "a domain with a NotReady member waits whole; the next goes", nodes: func() []UpgradeNode {
			n, _ := racks(UpgradeRequired)
			return withNode(n, "a-2", func(n *UpgradeNode) { n.Ready = false })
		}, maxDomains: 1, minNodes: 1, start: []string{"b-1", "b-2"}, noSlot: []string{"c-1", "c-2"}, notReady: []string{"a-2"}},
		{name: "members not in the rollout count for the floor", nodes: func() []UpgradeNode {
			n, _ := racks(UpgradeRequired)
			return append(n, UpgradeNode{Name: "spare", Ready: true, Unavailable: true})
		}, maxDomains: 2, minNodes: 3, start: []string{"a-1", "a-2"}, noSlot: []string{"b-1", "b-2", "c-1", "c-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, domainOf := racks(UpgradeRequired)
			p := PlanDomainWave(tc.nodes(), domainOf, tc.maxDomains, tc.minNodes)
			assert.ElementsMatch(t, tc.start, p.Start, "start")
			assert.ElementsMatch(t, tc.cont, p.Continue, "continue")
			assert.ElementsMatch(t, tc.noSlot, p.NoSlot, "no slot")
			assert.ElementsMatch(t, tc.notReady, p.NotReady, "not ready")
		})
	}
}

func TestPlanDomainWaveStopsOnFailure(t *testing.T) {
	nodes, domainOf := racks(UpgradeRequired)
	nodes = withNode(nodes, "a-1", func(n *UpgradeNode) { n.State = UpgradeFailed })
	p := PlanDomainWave(nodes, domainOf, 3, 1)
	assert.Empty(t, p.Start)
	assert.Equal(t, []string{"a-1"}, p.Failed)
	assert.ElementsMatch(t, []string{"a-2", "b-1", "b-2", "c-1", "c-2"}, p.Waiting)
}

func TestPredictDomainWaves(t *testing.T) {
	nodes, domainOf := racks(UpgradeRequired)
	waves, waiting := PredictDomainWaves(nodes, domainOf, 1, 1)
	assert.Equal(t, [][]string{{"a-1", "a-2"}, {"b-1", "b-2"}, {"c-1", "c-2"}}, waves)
	assert.Empty(t, waiting)
}

func TestRolloutDomains(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(min int) *metav1.Time { m := metav1.NewTime(t0.Add(time.Duration(min) * time.Minute)); return &m }
	nodes := []v1alpha1.DriverRolloutNode{
		// rack a: overlapping 0-10 and 5-12 → 12 minutes once.
		{Name: "a-1", Domain: "a", State: string(UpgradeDone), OutSince: at(0), OutUntil: at(10)},
		{Name: "a-2", Domain: "a", State: string(UpgradeDone), OutSince: at(5), OutUntil: at(12)},
		// rack b: apart 0-2 and 20-22 → 4 minutes; one still out until the end (30).
		{Name: "b-1", Domain: "b", State: string(UpgradeDone), OutSince: at(0), OutUntil: at(2)},
		{Name: "b-2", Domain: "b", State: string(UpgradeDone), OutSince: at(20), OutUntil: at(22)},
		{Name: "b-3", Domain: "b", State: string(UpgradeInstall), OutSince: at(25)},
		// rack c: not started.
		{Name: "c-1", Domain: "c", State: string(UpgradeRequired)},
		// outside every domain: counted nowhere.
		{Name: "lone", State: string(UpgradeInstall), OutSince: at(0)},
	}
	domains, total := RolloutDomains(nodes, t0.Add(30*time.Minute))
	require.Len(t, domains, 3)
	assert.Equal(t, v1alpha1.DriverRolloutDomain{Name: "a", State: RolloutDomainDone, Nodes: 2, Done: 2, UnavailableSeconds: 12 * 60}, domains[0])
	assert.Equal(t, v1alpha1.DriverRolloutDomain{Name: "b", State: RolloutDomainInProgress, Nodes: 3, Done: 2, UnavailableSeconds: 9 * 60}, domains[1])
	assert.Equal(t, v1alpha1.DriverRolloutDomain{Name: "c", State: RolloutDomainWaiting, Nodes: 1}, domains[2])
	assert.Equal(t, 21*time.Minute, total)
}

func TestCheckMaxUnavailableDomains(t *testing.T) {
	rackNode := func(name, rack string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.clique": rack}}}
	}
	// racks of 4, 2, 2 and a node outside every rack: 9 nodes.
	members := []*corev1.Node{rackNode("a1", "a"), rackNode("a2", "a"), rackNode("a3", "a"), rackNode("a4", "a"),
		rackNode("b1", "b"), rackNode("b2", "b"), rackNode("c1", "c"), rackNode("c2", "c"), {ObjectMeta: metav1.ObjectMeta{Name: "lone"}}}
	pool := func(minNodes int32, topo bool) *v1alpha1.Pool {
		p := &v1alpha1.Pool{Spec: v1alpha1.PoolSpec{MinNodes: minNodes}}
		if topo {
			p.Spec.Topology = &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pool *v1alpha1.Pool
		k    int32
		err  string
	}{
		{name: "one domain, the largest, leaves 5 ≥ 5", pool: pool(5, true), k: 1},
		{name: "two domains leave 3 < 5", pool: pool(5, true), k: 2,
			err: `[U6] spec.maxUnavailableDomains 2 would leave 3 of pool "p"'s 9 nodes available (its 2 largest domains hold 6), below its minNodes 5; accepted: at most 1`},
		{name: "even one is too many", pool: pool(6, true), k: 1, err: "accepted: none: lower the pool's minNodes"},
		{name: "more domains than the pool has", pool: pool(1, true), k: 9, err: "would leave 0 of"},
		{name: "no topology", pool: pool(1, false), k: 1, err: `[U6] spec.maxUnavailableDomains applies to a pool with a topology, and pool "p" has none`},
		{name: "no Pool object", k: 1, err: "has none (no spec.topology)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckMaxUnavailableDomains(tc.pool, "p", members, tc.k)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
			var v *Violation
			require.ErrorAs(t, err, &v)
			assert.Equal(t, FieldMaxUnavailableDomains, v.Field)
		})
	}
}

func TestDomainPeersNotBack(t *testing.T) {
	nodes := []v1alpha1.DriverRolloutNode{
		{Name: "a1", Domain: "a", State: string(UpgradeUncordon)},
		{Name: "a2", Domain: "a", State: string(UpgradeInstall)},
		{Name: "a3", Domain: "a", State: string(UpgradeValidate)},
		{Name: "a4", Domain: "a", State: string(UpgradeFailed)},   // holds nothing back
		{Name: "a5", Domain: "a", State: string(UpgradeRequired)}, // NotReady, not started
		{Name: "a6", Domain: "a", State: string(UpgradeDone)},
		{Name: "b1", Domain: "b", State: string(UpgradeUncordon)},
		{Name: "b2", Domain: "b", State: string(UpgradeUncordon)},
		{Name: "x", State: string(UpgradeUncordon)},
	}
	assert.Equal(t, []string{"a2", "a3"}, DomainPeersNotBack(nodes, "a1"))
	assert.Empty(t, DomainPeersNotBack(nodes, "b1"), "every member validated")
	assert.Empty(t, DomainPeersNotBack(nodes, "x"), "outside every domain")
}
