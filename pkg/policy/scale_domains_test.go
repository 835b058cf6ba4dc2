package policy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const testSuperPod = "huawei.com/topotree.superpodid"

var superPods = Topology{Levels: []string{testSuperPod}, Unit: testSuperPod, MinNodesPerDomain: 2}

// rackPool is the example: 16 nodes node-00..node-15 with 8 GPUs each, node i
// in super node sp-(i%4) (hostnames do not follow racks), pods of 8 GPUs on busy ones.
func rackPool(busy ...int) ([]*corev1.Node, []ScaleCandidate, map[string]int64) {
	isBusy := map[int]bool{}
	for _, b := range busy {
		isBusy[b] = true
	}
	var nodes []*corev1.Node
	var cands []ScaleCandidate
	used := map[string]int64{}
	for i := range 16 {
		name := fmt.Sprintf("node-%02d", i)
		n := readyNode(name, map[string]string{LabelPool: "train", testSuperPod: fmt.Sprintf("sp-%d", i%4)})
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		nodes = append(nodes, n)
		c := ScaleCandidate{Name: name, State: NodeRunning, Ready: true}
		if isBusy[i] {
			c.WorkloadPods, c.Used = 1, 8
			used[name] = 8
		}
		cands = append(cands, c)
	}
	return nodes, cands, used
}

// TestPlanScaleDownByDomain is the example: sp-0 runs pods on node-00 and
// node-04, sp-3 on node-03; sp-1 and sp-2 are idle. Scaling down by 4, the flat rule
// takes node-15, node-14, node-13, node-12 (idle, last first): one node of each super
// node, so no whole domain is left free and the largest free block falls from 32 to 24
// GPUs. The domain rule takes sp-2 whole and sp-1 stays free: 32 before and after.
func TestPlanScaleDownByDomain(t *testing.T) {
	nodes, cands, used := rackPool(0, 4, 3)
	p := pool("train", "A100-80G", 1)
	ds := NewDomainScale(p, superPods, nodes)

	flat, err := PlanScaleDown(p, cands, 4)
	require.NoError(t, err)
	assert.Equal(t, []string{"node-15", "node-14", "node-13", "node-12"}, flat)

	plan, err := ds.PlanScaleDown(p, cands, 4)
	require.NoError(t, err)
	assert.Equal(t, []string{"node-14", "node-10", "node-06", "node-02"}, plan.Remove)
	assert.Equal(t, []string{"sp-2"}, plan.Whole)
	assert.Equal(t, []string{"domain sp-2 leaves whole"}, plan.Describe())

	before := LargestFreeBlock(superPods, nodes, used, "nvidia.com/gpu", nil)
	assert.Equal(t, "32 nvidia.com/gpu in domain sp-1", before.String())
	assert.Equal(t, "32 nvidia.com/gpu in domain sp-1", LargestFreeBlock(superPods, nodes, used, "nvidia.com/gpu", set(plan.Remove)).String())
	assert.Equal(t, "24 nvidia.com/gpu in domain sp-1", LargestFreeBlock(superPods, nodes, used, "nvidia.com/gpu", set(flat)).String())
}

func set(names []string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

func TestPlanScaleDownByDomainOrder(t *testing.T) {
	p := pool("train", "A100-80G", 1)
	for _, tc := range []struct {
		name     string
		busy     []int
		count    int
		extra    func(nodes []*corev1.Node, cands []ScaleCandidate) // changes before planning
		remove   []string
		describe []string
		err      string
	}{
		{name: "two idle domains: the last first", count: 8, busy: []int{0},
			remove:   []string{"node-15", "node-11", "node-07", "node-03", "node-14", "node-10", "node-06", "node-02"},
			describe: []string{"domain sp-3 leaves whole", "domain sp-2 leaves whole"}},
		{name: "a degraded idle domain goes before a whole one", count: 4, busy: []int{0},
			extra:  func(nodes []*corev1.Node, _ []ScaleCandidate) { nodes[1].Spec.Unschedulable = true },
			remove: []string{"node-13", "node-09", "node-05", "node-01"}, describe: []string{"domain sp-1 leaves whole"}},
		{name: "no idle domain: the least used gives down to its floor, then the next", count: 3, busy: []int{0, 1, 2, 3, 5},
			remove:   []string{"node-15", "node-11", "node-14"},
			describe: []string{"domain sp-2 gives node-14", "domain sp-3 gives node-15, node-11"}},
		{name: "a domain gives all its members when that fits", count: 6, busy: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
			remove:   []string{"node-15", "node-11", "node-07", "node-03", "node-14", "node-10"},
			describe: []string{"domain sp-3 leaves whole", "domain sp-2 gives node-14, node-10"}},
		{name: "outside members after whole domains, before partial ones", count: 5, busy: []int{0, 1, 3},
			extra:    func(nodes []*corev1.Node, _ []ScaleCandidate) { delete(nodes[9].Labels, testSuperPod) },
			remove:   []string{"node-14", "node-10", "node-06", "node-02", "node-09"},
			describe: []string{"domain sp-2 leaves whole", "outside every domain: node-09"}},
		{name: "resumed nodes first", count: 4, busy: []int{0, 4, 3},
			extra:    func(_ []*corev1.Node, cands []ScaleCandidate) { cands[7].Resuming = true },
			remove:   []string{"node-07", "node-14", "node-10", "node-13"},
			describe: []string{"resumes the interrupted scale-down of node-07", "domain sp-1 gives node-13", "domain sp-2 gives node-14, node-10"}},
		{name: "the last member in service of a degraded domain may go: it leaves none in service", count: 3, busy: []int{0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15},
			extra: func(nodes []*corev1.Node, cands []ScaleCandidate) {
				for _, i := range []int{0, 4, 8} { // sp-0 keeps only node-12 in service
					nodes[i].Spec.Unschedulable, cands[i].State = true, NodeCordoned
				}
			},
			remove: []string{"node-08", "node-04", "node-12"}, describe: []string{"domain sp-0 gives node-08, node-04, node-12"}},
		{name: "floors leave too few", count: 15, busy: []int{0, 1, 2, 3, 4, 5, 6, 7},
			err: `[N3] pool "train" cannot lose 15 node(s) while each domain keeps minNodesPerDomain 2 node(s) in service or leaves whole (and the pool keeps minNodes 1 Ready): 14 can go`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, cands, _ := rackPool(tc.busy...)
			if tc.extra != nil {
				tc.extra(nodes, cands)
			}
			plan, err := NewDomainScale(p, superPods, nodes).PlanScaleDown(p, cands, tc.count)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.remove, plan.Remove)
			assert.Equal(t, tc.describe, plan.Describe())
		})
	}
}

func TestCheckScaleDownNodesByDomain(t *testing.T) {
	nodes, cands, _ := rackPool(0)
	nodes[15].Spec.Unschedulable = true // node-15, of sp-3, is cordoned
	p := pool("train", "A100-80G", 1)
	ds := NewDomainScale(p, superPods, nodes)
	for _, tc := range []struct {
		remove []string
		err    string
	}{
		{remove: []string{"node-02", "node-06"}},                       // 4 -> 2 in service
		{remove: []string{"node-02", "node-06", "node-10", "node-14"}}, // the whole domain
		{remove: []string{"node-03", "node-07", "node-11"}},            // sp-3 keeps node-15, out of service: 0 in service
		{remove: []string{"node-15"}},                                  // out of service: it holds none of sp-3's capacity
		{remove: []string{"node-03", "node-07"}, err: `[N3] domain "sp-3" of pool "train" has 4 node(s), 3 in service, and minNodesPerDomain 2: this would leave 1 in service; take at most 1 of its nodes in service, or the whole domain (node-03, node-07, node-11, node-15), or cordon the ones that stay first`},
		{remove: []string{"node-02", "node-06", "node-10"}, err: `[N3] domain "sp-2" of pool "train" has 4 node(s), 4 in service, and minNodesPerDomain 2: this would leave 1 in service; take at most 2 of its nodes in service, or the whole domain (node-02, node-06, node-10, node-14), or cordon the ones that stay first`},
	} {
		err := ds.CheckScaleDownNodes(p, cands, tc.remove)
		if tc.err == "" {
			assert.NoError(t, err, tc.remove)
		} else {
			assert.EqualError(t, err, tc.err, tc.remove)
		}
	}
}

func TestCheckDomainFloor(t *testing.T) {
	m := []string{"a", "b", "c", "d"}
	for _, tc := range []struct {
		inService, taken int
		ok               bool
	}{
		{4, 1, true}, {3, 1, true}, {2, 1, false}, {1, 1, true}, {4, 0, true}, {1, 0, true}, {4, 4, true}, {4, 3, false},
	} {
		err := CheckDomainFloor("p", "d", m, tc.inService, tc.taken, 2)
		assert.Equal(t, tc.ok, err == nil, "%d in service, %d taken: %v", tc.inService, tc.taken, err)
	}
}

// TestDomainScaleCountsInServiceAsTheWebhook: a member tainted with the pool's
// accelerator resource as key (NoSchedule) is in service, since ExtendedResourceToleration
// tolerates that taint for the pool's pods; the webhook's N3 (admission DomainAfter)
// counts it so with spec.accelerator.resourceName, and the scale plan must agree. Before
// the plan passed the resource, it counted node-15 out, so sp-3 had 3 in service and
// taking two of them was refused although the webhook would let both go.
func TestDomainScaleCountsInServiceAsTheWebhook(t *testing.T) {
	const npu = corev1.ResourceName("huawei.com/Ascend910")
	nodes, cands, _ := rackPool(0)
	nodes[15].Spec.Taints = []corev1.Taint{{Key: string(npu), Effect: corev1.TaintEffectNoSchedule}} // node-15, of sp-3
	p := pool("train", "Snt9B", 1)
	p.Spec.Accelerator.ResourceName = npu
	ds := NewDomainScale(p, superPods, nodes)

	assert.True(t, ds.InService["node-15"], "the taint the pool's pods tolerate keeps node-15 in service")
	assert.Equal(t, NodeOut(nodes[15], "train", npu) == "", ds.InService["node-15"], "the webhook's count")
	assert.NoError(t, ds.CheckScaleDownNodes(p, cands, []string{"node-03", "node-07"}), "sp-3 keeps node-11 and node-15 in service")
	assert.EqualError(t, ds.CheckScaleDownNodes(p, cands, []string{"node-03", "node-07", "node-11"}),
		`[N3] domain "sp-3" of pool "train" has 4 node(s), 4 in service, and minNodesPerDomain 2: this would leave 1 in service; take at most 2 of its nodes in service, or the whole domain (node-03, node-07, node-11, node-15), or cordon the ones that stay first`)

	// A taint of another key is not tolerated: node-15 is out, for both.
	nodes[15].Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}
	ds = NewDomainScale(p, superPods, nodes)
	assert.False(t, ds.InService["node-15"])
	assert.Equal(t, OutTainted, NodeOut(nodes[15], "train", npu))
}
