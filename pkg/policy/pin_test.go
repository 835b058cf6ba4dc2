package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeView is a NodeView over a list of nodes.
type nodeView []*corev1.Node

func (v nodeView) NodeNamed(name string) *corev1.Node {
	for _, n := range v {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (v nodeView) NodesWithHostname(h string) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range v {
		if n.Labels[LabelHostname] == h {
			out = append(out, n)
		}
	}
	return out
}

func (v nodeView) PoolHasMembers(pool string) bool {
	for _, n := range v {
		if n.Labels[LabelPool] == pool {
			return true
		}
	}
	return false
}

// pinNodes: pool "restricted" holds r-1 and r-2 (r-2 an A100), "open" holds o-1 (an
// A100), free-1 is in no pool, d-1 is labelled "default". r-2's hostname differs from
// its name, as on clouds that name nodes by their DNS name.
func pinNodes() nodeView {
	node := func(name, host string, kv ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelHostname: host}}}
		for i := 0; i < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
		return n
	}
	return nodeView{
		node("r-1", "r-1", LabelPool, "restricted", "rank", "1"),
		node("r-2.internal", "r-2", LabelPool, "restricted", LabelGPUType, "A100", "rank", "2"),
		node("o-1", "o-1", LabelPool, "open", LabelGPUType, "A100", "rank", "3"),
		node("free-1", "free-1", "rank", "4"),
		node("d-1", "d-1", LabelPool, DefaultPool),
	}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// term is one node selector term of expressions.
func term(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}
}

func fields(f ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: f}
}

func placement(selector map[string]string, terms ...corev1.NodeSelectorTerm) *corev1.PodSpec {
	spec := &corev1.PodSpec{NodeSelector: selector}
	if len(terms) > 0 {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	return spec
}

func TestPlacementPin(t *testing.T) {
	in, notIn, exists, gt := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpGt
	for _, tt := range []struct {
		name string
		spec *corev1.PodSpec
		pool string // "" not pinned
		why  string // part of Why when not pinned
	}{
		{"no placement", placement(nil), "", "no required placement"},
		{"nodeSelector on the pool", placement(map[string]string{LabelPool: "restricted"}), "restricted", ""},
		{"nodeSelector on a pool without members yet", placement(map[string]string{LabelPool: "empty"}), "empty", ""},
		{"affinity pool In [P]", placement(nil, term(req(LabelPool, in, "restricted"))), "restricted", ""},
		{"pool In [P, a pool with no member]: only P's members satisfy it", placement(nil, term(req(LabelPool, in, "restricted", "ghost"))), "restricted", ""},
		{"pool In [P, Q]", placement(nil, term(req(LabelPool, in, "restricted", "open"))), "", `pool "open" and pool "restricted"`},
		{"pool In [P, Q] ANDed with pool In [P]", placement(nil, term(req(LabelPool, in, "restricted", "open"), req(LabelPool, in, "restricted"))), "restricted", ""},
		{"pool In [P] ANDed with a gpu-type no member has: still P's (named)", placement(nil, term(req(LabelPool, in, "restricted"), req(LabelGPUType, in, "H100"))), "restricted", ""},
		{"two terms, both P", placement(nil, term(req(LabelPool, in, "restricted")), fields(req(fieldNodeName, in, "r-1"))), "restricted", ""},
		{"two terms, P or Q", placement(nil, term(req(LabelPool, in, "restricted")), term(req(LabelPool, in, "open"))), "", `pool "open" and pool "restricted"`},
		{"two terms, P or anything", placement(nil, term(req(LabelPool, in, "restricted")), term(req(LabelGPUType, in, "A100"))), "", "term 1 of its required node affinity names no pool"},
		{"pool NotIn: any other node", placement(nil, term(req(LabelPool, notIn, "open"))), "", "names no pool"},
		{"pool Exists: any pool's node", placement(nil, term(req(LabelPool, exists))), "", "names no pool"},
		{"gpu-type alone: not judged by labels other than names", placement(nil, term(req(LabelGPUType, in, "A100"))), "", "names no pool"},
		{"matchFields on a member", placement(nil, fields(req(fieldNodeName, in, "r-1"))), "restricted", ""},
		{"matchFields on two members", placement(nil, fields(req(fieldNodeName, in, "r-1")), fields(req(fieldNodeName, in, "r-2.internal"))), "restricted", ""},
		{"matchFields on a member and a node of no pool", placement(nil, fields(req(fieldNodeName, in, "r-1")), fields(req(fieldNodeName, in, "free-1"))), "", `no pool and pool "restricted"`},
		{"matchFields on a member and a node labelled default", placement(nil, fields(req(fieldNodeName, in, "r-1")), fields(req(fieldNodeName, in, "d-1"))), "", `no pool and pool "restricted"`},
		{"matchFields on a member and a node the cache does not hold", placement(nil, fields(req(fieldNodeName, in, "r-1")), fields(req(fieldNodeName, in, "not-yet"))), "restricted", ""},
		{"matchFields on members of two pools", placement(nil, fields(req(fieldNodeName, in, "r-1")), fields(req(fieldNodeName, in, "o-1"))), "", `pool "open" and pool "restricted"`},
		{"matchFields on the other pool's node, ANDed with a Gt it fails, or a member", placement(nil, corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{req(fieldNodeName, in, "o-1")}, MatchExpressions: []corev1.NodeSelectorRequirement{req("rank", gt, "3")}}, fields(req(fieldNodeName, in, "r-1"))), "restricted", ""},
		{"hostnames of two pools, ANDed with Gt and Lt only P's member passes", placement(nil, term(req(LabelHostname, in, "r-1", "o-1"), req("rank", gt, "0"), req("rank", corev1.NodeSelectorOpLt, "2"))), "restricted", ""},
		{"hostnames of two pools, ANDed with NotIn on the other", placement(nil, term(req(LabelHostname, in, "r-1", "o-1"), req(LabelPool, notIn, "open"))), "restricted", ""},
		{"hostnames of two pools, ANDed with Exists on a label only the other's node has", placement(nil, term(req(LabelHostname, in, "r-1", "o-1"), req(LabelGPUType, exists))), "open", ""},
		{"matchFields NotIn is invalid for the scheduler too: not bounded", placement(nil, fields(req(fieldNodeName, notIn, "o-1"))), "", "names no pool"},
		{"hostname In [a member], by its label not its name", placement(nil, term(req(LabelHostname, in, "r-2"))), "restricted", ""},
		{"hostname In a member's name that is not its hostname: no node", placement(nil, term(req(LabelHostname, in, "r-2.internal"))), "", "no node satisfies"},
		{"hostname In [member, free node]", placement(nil, term(req(LabelHostname, in, "r-1", "free-1"))), "", `no pool and pool "restricted"`},
		{"hostname by nodeSelector", placement(map[string]string{LabelHostname: "r-1"}), "restricted", ""},
		{"nodeSelector hostname ANDed with an unbounded term", placement(map[string]string{LabelHostname: "r-1"}, term(req(LabelGPUType, exists))), "", "no node satisfies"},
		{"nodeSelector hostname bounds every term", placement(map[string]string{LabelHostname: "r-2"}, term(req(LabelGPUType, exists)), term(req("rank", gt, "1"))), "restricted", ""},
		{"nodeSelector pool ANDed with hostname of the other pool: no node, judged by the pool named", placement(map[string]string{LabelPool: "restricted"}, term(req(LabelHostname, in, "o-1"))), "restricted", ""},
		{"nodeSelector on the pool, affinity any gpu-type", placement(map[string]string{LabelPool: "restricted"}, term(req(LabelGPUType, exists))), "restricted", ""},
		{"nothing satisfies and no pool named", placement(nil, fields(req(fieldNodeName, in, "not-yet"))), "", "no node satisfies"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pin := PlacementPin(tt.spec, pinNodes())
			require.Equal(t, tt.pool, pin.Pool, "why: %s", pin.Why)
			if tt.pool == "" {
				assert.Contains(t, pin.Why, tt.why)
				assert.Empty(t, pin.How)
			} else {
				assert.NotEmpty(t, pin.How)
				assert.Empty(t, pin.Why)
			}
		})
	}
}

// pinCatalog is the test catalog that also knows pinNodes, as the webhook's does.
type pinCatalog struct {
	catalog
	nodeView
}

func TestMutatePodJudgesPinnedPodsAsThePools(t *testing.T) {
	cat := testCatalog()
	restricted := pool("restricted", "", 0)
	restricted.Spec.Namespaces = []string{"ai-team"}
	cat.pools["restricted"] = PoolInfo{Name: "restricted", Object: restricted, Members: 2}
	view := pinCatalog{cat, pinNodes()}
	byName := affinityTerms(fields(req(fieldNodeName, corev1.NodeSelectorOpIn, "r-1")), fields(req(fieldNodeName, corev1.NodeSelectorOpIn, "r-2.internal")))

	_, _, err := MutatePod(testPod(inNamespace("mallory"), byName), ns("mallory"), view, Accelerators{})
	require.Error(t, err)
	assert.Equal(t, `[P4] the pod's required node affinity pins it to pool "restricted" (only the pool's members satisfy it), so it is judged as the pool's pod: `+
		`namespace "mallory" may not use pool "restricted": the pool admits only the namespaces its spec.namespaces lists or its spec.namespaceSelector selects, and "mallory" is not among them; use a pool that admits it, or have "mallory" added to spec.namespaces of pool "restricted"`, err.Error())

	patch, _, err := MutatePod(testPod(byName), ns("ai-team"), view, Accelerators{})
	require.NoError(t, err, "from a namespace the pool admits")
	assert.Equal(t, map[string]string{LabelPool: "restricted"}, patch.Labels, "P1 labels it as the pool's pod")

	_, _, err = MutatePod(testPod(byName), ns("ai-team"), cat, Accelerators{})
	require.NoError(t, err, "a catalog that is no NodeView judges no affinity pin")

	_, _, err = MutatePod(testPod(inNamespace("mallory"), podLabels(LabelPool, DefaultPool), byName), ns("mallory"), view, Accelerators{})
	require.Error(t, err, "labelled default, pinned to the pool")
	assert.Contains(t, err.Error(), `[P4] the pod's required node affinity pins it to pool "restricted"`)
	assert.Contains(t, err.Error(), `[P1] label runwhere.ai/pool=default says the pod asks for no pool, but its required node affinity pins it to pool "restricted"`)

	_, _, err = MutatePod(testPod(inNamespace("mallory"), podLabels(LabelPool, DefaultPool), nodeSelector(LabelPool, "restricted")), ns("mallory"), view, Accelerators{})
	assert.ErrorContains(t, err, `[P4] the pod's nodeSelector runwhere.ai/pool=restricted pins it to pool "restricted"`, "labelled default, pinned by nodeSelector")

	_, _, err = MutatePod(testPod(affinityTerms(term(req(LabelPool, corev1.NodeSelectorOpIn, "nowhere")))), ns("ai-team"), view, Accelerators{})
	assert.ErrorContains(t, err, `[P2] pool "nowhere" (the pod's required node affinity, which only its members satisfy) does not exist`)

	patch, _, err = MutatePod(testPod(inNamespace("mallory"), ownedBy("DaemonSet"), byName), ns("mallory"), view, Accelerators{})
	require.NoError(t, err, "a DaemonSet's pod is placed node by node")
	assert.True(t, patch.Empty())
	_, _, err = MutatePod(testPod(inNamespace("mallory"), ownedBy("DaemonSet"), limits("nvidia.com/gpu", 8), byName), ns("mallory"), view, Accelerators{})
	assert.ErrorContains(t, err, `[P4] the pod's required node affinity pins it to pool "restricted"`,
		"a DaemonSet owner (a claim) asking for GPUs on a restricted pool's member is judged by its pin: only node agents, which ask for no device, are placed node by node")

	_, _, err = MutatePod(testPod(inNamespace("mallory"), affinityTerms(fields(req(fieldNodeName, corev1.NodeSelectorOpIn, "r-1")), fields(req(fieldNodeName, corev1.NodeSelectorOpIn, "free-1")))), ns("mallory"), view, Accelerators{})
	assert.NoError(t, err, "a placement that a node of no pool satisfies too is no pool's pod")
}

func affinityTerms(terms ...corev1.NodeSelectorTerm) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = placement(nil, terms...).Affinity
	}
}
