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

// domainCatalog is a catalog of one pool "train" (minNodes 1, super nodes with
// minNodesPerDomain 2) that counts its domains from nodes, less granted departures.
type domainCatalog struct {
	catalog
	nodes   []*corev1.Node
	granted map[string]bool
}

func newDomainCatalog(nodes []*corev1.Node) *domainCatalog {
	p := pool("train", "A100-80G", 1)
	p.Spec.Topology = &v1alpha1.TopologySpec{Levels: []string{testSuperPod}, MinNodesPerDomain: 2}
	return &domainCatalog{catalog: catalog{pools: map[string]PoolInfo{"train": {Name: "train", Object: p, Members: len(nodes), GPUTypes: []string{"A100-80G"}}}},
		nodes: nodes, granted: map[string]bool{}}
}

func (c *domainCatalog) RemainingAfter(string, string) (int, int) { return 10, 10 }

func (c *domainCatalog) DomainAfter(pool, node string, t Topology, d string) ([]string, int) {
	var names []string
	in := 0
	for _, n := range c.DomainPeers(pool, "", t, d) {
		names = append(names, n.Name)
		if n.Name != node && !c.granted[n.Name] && NodeOut(n, pool, "") == "" {
			in++
		}
	}
	return names, in
}

func (c *domainCatalog) DomainPeers(_, node string, t Topology, d string) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range c.nodes {
		if got, ok := t.DomainOf(n); ok && got == d && n.Name != node {
			out = append(out, n)
		}
	}
	return out
}

func superNode(name, domain string, gpus int64) *corev1.Node {
	n := readyNode(name, map[string]string{LabelPool: "train", LabelGPUType: "A100-80G", testSuperPod: domain})
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	return n
}

func leaving(n *corev1.Node) *corev1.Node {
	out := n.DeepCopy()
	delete(out.Labels, LabelPool)
	return out
}

// One by one from a domain of 4 in service with floor 2: 4 -> 3 -> 2 are let go, 2 -> 1
// is refused, through a label removal or a deletion; a cordoned member may always leave,
// and the last member in service may leave once the others are cordoned (the domain
// leaves whole).
func TestAdmitNodeDomainFloor(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 4 {
		nodes = append(nodes, superNode(fmt.Sprintf("n%d", i), "sp-0", 8))
	}
	cat := newDomainCatalog(nodes)
	for _, n := range nodes[:2] {
		_, err := AdmitNode(leaving(n), n, cat)
		require.NoError(t, err, n.Name)
		cat.granted[n.Name] = true
	}
	_, err := AdmitNode(leaving(nodes[2]), nodes[2], cat)
	assert.EqualError(t, err, `[N3] node "n2" cannot leave pool "train": its domain "sp-0" (4 node(s): n0, n1, n2, n3) would keep 1 node(s) in service, below minNodesPerDomain 2; a domain leaves whole: cordon its nodes first (kubectl litepool scale train --remove n0,n1,n2,n3 does), or lower spec.topology.minNodesPerDomain`)
	_, err = AdmitNode(nil, nodes[3], cat)
	assert.ErrorContains(t, err, `node "n3" cannot leave pool "train": its domain "sp-0"`, "a deletion is a departure too")

	forced := nodes[2].DeepCopy()
	forced.Annotations = map[string]string{AnnotationForce: "alice: rack power work"}
	d, err := AdmitNode(leaving(forced), forced, cat)
	assert.NoError(t, err, "runwhere.ai/force overrides N3's domain floor as it does the pool's")
	require.NotNil(t, d.Forced)

	nodes[3].Spec.Unschedulable = true
	_, err = AdmitNode(leaving(nodes[3]), nodes[3], cat)
	assert.NoError(t, err, "a cordoned member holds none of the domain's capacity")
	_, err = AdmitNode(leaving(nodes[2]), nodes[2], cat)
	assert.NoError(t, err, "with n3 cordoned, n2 is the last in service: the domain leaves whole")

	outside := readyNode("o1", map[string]string{LabelPool: "train", LabelGPUType: "A100-80G"})
	_, err = AdmitNode(leaving(outside), outside, cat)
	assert.NoError(t, err, "a member outside every domain has no domain floor")
}

// N2 for a node joining into a domain of another compute specification; the topology
// labels themselves are never refused.
func TestAdmitNodeDomainJoin(t *testing.T) {
	cat := newDomainCatalog([]*corev1.Node{superNode("n0", "sp-0", 8), superNode("n1", "sp-0", 8)})
	joining := func(name string, gpus int64, model string) (*corev1.Node, *corev1.Node) {
		n := superNode(name, "sp-0", gpus)
		n.Labels[LabelGPUType] = model
		old := n.DeepCopy()
		delete(old.Labels, LabelPool)
		return n, old
	}
	n, old := joining("j1", 8, "A100-80G")
	_, err := AdmitNode(n, old, cat)
	assert.NoError(t, err)

	n, old = joining("j2", 4, "A100-80G")
	_, err = AdmitNode(n, old, cat)
	assert.EqualError(t, err, `[N2] node "j2" (A100-80G, 4 accelerator(s)) cannot join pool "train" in domain "sp-0": its member n0 is A100-80G, 8 accelerator(s), and a domain is one compute specification; choose a node of that specification, or one of another domain`)

	n, old = joining("j3", 0, "A100-80G")
	n.Status.Allocatable = nil
	_, err = AdmitNode(n, old, cat)
	assert.NoError(t, err, "a node whose device plugin is not up yet states no count")

	// A member relabelled into sp-0 with another count: a topology write, never refused.
	moved := superNode("n5", "sp-1", 4)
	into := moved.DeepCopy()
	into.Labels[testSuperPod] = "sp-0"
	_, err = AdmitNode(into, moved, cat)
	assert.NoError(t, err)
}
