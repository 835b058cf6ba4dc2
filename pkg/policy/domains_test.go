package policy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// domainNode is a member of pool "train" with 8 GPUs in super pod pod (rack r1); pod ""
// leaves the label out.
func domainNode(name, pod string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := capacityNode(name, "train", 8, mutate...)
	if pod != "" {
		n.Labels["huawei.com/topotree.superpodid"] = pod
		n.Labels["huawei.com/topotree.rackid"] = "r1"
	}
	return n
}

func TestDomains(t *testing.T) {
	top, err := ResolveTopology(&v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend})
	require.NoError(t, err)
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	}
	own := func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{ExclusiveTaint("train")} }
	model := func(m string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[LabelGPUType] = m } }
	sixteen := func(n *corev1.Node) {
		n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")}
		n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("16")
	}
	lostOne := func(n *corev1.Node) {
		n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("7")
	}
	members := []*corev1.Node{
		// p1: whole and idle, its members tainted with the pool's own taint.
		domainNode("p1-a", "p1", own), domainNode("p1-b", "p1", own),
		// p2: whole, 12 of 16 in use (one member over-reported: never below 0).
		domainNode("p2-a", "p2"), domainNode("p2-b", "p2"),
		// p3: degraded, one member cordoned; the other is idle.
		domainNode("p3-a", "p3", cordoned), domainNode("p3-b", "p3"),
		// p4: out, one member cordoned and one tainted.
		domainNode("p4-b", "p4", tainted), domainNode("p4-a", "p4", cordoned),
		// p5: mixed by model (A100 and H100), whole and idle.
		domainNode("p5-a", "p5", model("A100")), domainNode("p5-b", "p5", model("NVIDIA-H100-80GB-HBM3")),
		// p6: mixed by count (8 and 16), whole, 16 free of 24.
		domainNode("p6-a", "p6"), domainNode("p6-b", "p6", sixteen),
		// p7: one name of one model each (A100, NVIDIA-A100...), and a GPU lost to the
		// device plugin: neither makes it mixed.
		domainNode("p7-a", "p7", model("A100-80G")), domainNode("p7-b", "p7", model("NVIDIA-A100-SXM4-80GB"), lostOne),
		// no super pod label: outside.
		domainNode("z-out", ""), domainNode("a-out", ""),
	}
	used := map[string]int64{"p2-a": 8, "p2-b": 4, "p3-b": 0, "p6-a": 8, "p7-a": 1, "p4-b": 8, "ghost": 100}
	used["p2-a"] = 9 // more than allocatable (a stale count): the member's free is 0

	v := top.Domains(members, used, "nvidia.com/gpu")

	assert.Equal(t, []string{"a-out", "z-out"}, v.Outside)
	assert.Equal(t, Domain{Members: []string{"a-out", "z-out"}, Schedulable: []string{"a-out", "z-out"}, Total: 16, Free: 16, State: DomainWhole},
		v.OutsideFigures, "outside members' figures, counted apart")
	want := []Domain{
		{Name: "p1", Members: []string{"p1-a", "p1-b"}, Schedulable: []string{"p1-a", "p1-b"}, Total: 16, Free: 16, State: DomainWhole},
		{Name: "p2", Members: []string{"p2-a", "p2-b"}, Schedulable: []string{"p2-a", "p2-b"}, Total: 16, Free: 4, State: DomainWhole},
		{Name: "p3", Members: []string{"p3-a", "p3-b"}, Schedulable: []string{"p3-b"}, Total: 8, Free: 8, State: DomainDegraded},
		{Name: "p4", Members: []string{"p4-a", "p4-b"}, State: DomainOut},
		{Name: "p5", Members: []string{"p5-a", "p5-b"}, Schedulable: []string{"p5-a", "p5-b"}, Total: 16, Free: 16, State: DomainWhole, Mixed: true},
		{Name: "p6", Members: []string{"p6-a", "p6-b"}, Schedulable: []string{"p6-a", "p6-b"}, Total: 24, Free: 16, State: DomainWhole, Mixed: true},
		{Name: "p7", Members: []string{"p7-a", "p7-b"}, Schedulable: []string{"p7-a", "p7-b"}, Total: 15, Free: 14, State: DomainWhole},
	}
	assert.Equal(t, want, v.Domains)
	assert.EqualValues(t, 16, v.LargestFreeBlock, "the most free in a whole domain; p3's 8 free are in a degraded one")
	assert.Equal(t, 2, v.WholeFree, "p1 and p5: whole, nothing in use")

	st := v.Status(top.Unit)
	assert.Equal(t, "huawei.com/topotree.superpodid", st.Unit)
	assert.EqualValues(t, 7, st.Domains)
	assert.EqualValues(t, 5, st.Whole)
	assert.EqualValues(t, 1, st.Degraded)
	assert.EqualValues(t, 1, st.Out)
	assert.EqualValues(t, 2, st.Mixed)
	assert.EqualValues(t, 2, st.WholeFree)
	assert.EqualValues(t, 2, st.Outside)
	assert.EqualValues(t, 16, st.LargestFreeBlock)
	names := func(s []v1alpha1.DomainSummary) (out []string) {
		for _, d := range s {
			out = append(out, fmt.Sprintf("%s:%d", d.Name, d.Free))
		}
		return out
	}
	assert.Equal(t, []string{"p4:0", "p2:4", "p3:8", "p7:14", "p1:16", "p5:16", "p6:16"}, names(st.Fullest), "least free first, ties by name")
	assert.Equal(t, []string{"p1:16", "p5:16", "p6:16", "p7:14", "p3:8", "p2:4", "p4:0"}, names(st.Freest))
}

// TestDomainStatusIsBounded: thousands of domains keep the status at
// TopologyStatusDomains fullest and freest.
func TestDomainStatusIsBounded(t *testing.T) {
	top, err := ResolveTopology(&v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend})
	require.NoError(t, err)
	var members []*corev1.Node
	used := map[string]int64{}
	for d := range 1000 {
		for m := range 4 {
			n := domainNode(fmt.Sprintf("n%04d-%d", d, m), fmt.Sprintf("p%04d", d))
			members = append(members, n)
			used[n.Name] = int64(d % 9)
		}
	}
	v := top.Domains(members, used, "nvidia.com/gpu")
	require.Len(t, v.Domains, 1000)
	st := v.Status(top.Unit)
	assert.Len(t, st.Fullest, TopologyStatusDomains)
	assert.Len(t, st.Freest, TopologyStatusDomains)
	assert.EqualValues(t, 0, st.Fullest[0].Free, "8 of 8 used on every member of p0008")
	assert.Equal(t, "p0008", st.Fullest[0].Name)
	assert.EqualValues(t, 32, st.Freest[0].Free)
	assert.Equal(t, "p0000", st.Freest[0].Name, "ties by name")
	assert.EqualValues(t, 32, v.LargestFreeBlock)
	assert.Equal(t, 112, v.WholeFree, "d%9 == 0 for 112 of 1000")
}
