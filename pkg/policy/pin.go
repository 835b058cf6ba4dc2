package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// LabelHostname is the node label kubelet sets to its hostname: a placement that
// names hostnames names nodes.
const LabelHostname = corev1.LabelHostname

// fieldNodeName is the one field node affinity's matchFields may name.
const fieldNodeName = "metadata.name"

// NodeView is what PlacementPin reads of the cluster's nodes. The webhook backs it with
// its informer cache (lookups by name and by index, no list of every node).
type NodeView interface {
	// NodeNamed is the node NAME, nil when none is known.
	NodeNamed(name string) *corev1.Node
	// NodesWithHostname are the nodes whose label kubernetes.io/hostname is h.
	NodesWithHostname(h string) []*corev1.Node
	// PoolHasMembers says whether some node carries runwhere.ai/pool=NAME.
	PoolHasMembers(name string) bool
}

// Pin is where a pod's required placement (nodeSelector and required node affinity)
// pins it: Pool is the one pool whose members alone can satisfy it ("" when none
// does), How says by what, for the messages of the rules that judge it as the pool's pod,
// and Why, when Pool is "", why the placement is no one pool's.
type Pin struct {
	Pool, How, Why string
}

// PlacementPin is the pool a pod's required placement pins it to: the pool whose members
// alone can satisfy its nodeSelector and required node affinity, so that it is that
// pool's pod whatever its labels say. The placement is the nodeSelector ANDed with each
// term of the required affinity (terms are ORed; a term's expressions ANDed). Each term
// must be bounded by names: the pool (nodeSelector or In on runwhere.ai/pool), node
// names (matchFields metadata.name In, one name each, as the API server requires), or hostnames (nodeSelector or In on
// kubernetes.io/hostname). A term bounded by node names or hostnames is judged against
// the nodes it names as the cache holds them (with every other requirement of the term:
// NotIn, Exists, Gt, ...); a node the cache does not hold cannot take the pod now and
// counts for no pool. A term bounded by pools alone is judged by the pools it names
// that have members, or by the one pool it names when none has. The pod is pinned when
// all its terms together reach exactly one pool and no node outside a pool; a term
// bounded by none of these (gpu-type In [...], runwhere.ai/pool NotIn [...], Exists)
// may be satisfied by any node, and pins nothing.
func PlacementPin(spec *corev1.PodSpec, nodes NodeView) Pin {
	terms := []corev1.NodeSelectorTerm{{}}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(spec.NodeSelector) == 0 && len(terms) == 1 && isEmptyTerm(terms[0]) {
		return Pin{Why: "the pod has no required placement"}
	}
	reached := map[string]bool{} // pools the placement reaches; "" for a node in none
	for i := range terms {
		pools, why := termPools(spec.NodeSelector, terms[i], nodes)
		if why != "" {
			if len(terms) > 1 {
				why = fmt.Sprintf("term %d of its required node affinity %s", i, why)
			}
			return Pin{Why: why}
		}
		for _, p := range pools {
			reached[p] = true
		}
	}
	switch {
	case len(reached) == 0:
		return Pin{Why: "no node satisfies the placement"}
	case len(reached) > 1 || reached[""]:
		return Pin{Why: "the placement can be satisfied by nodes of " + describePools(reached)}
	}
	var pool string
	for p := range reached {
		pool = p
	}
	return Pin{Pool: pool, How: describePin(spec)}
}

func isEmptyTerm(t corev1.NodeSelectorTerm) bool {
	return len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0
}

// termPools are the pools that can satisfy the nodeSelector ANDed with term, or why the
// term is not bounded by names.
func termPools(selector map[string]string, term corev1.NodeSelectorTerm, nodes NodeView) ([]string, string) {
	if candidates, named := namedNodes(selector, term, nodes); named {
		spec := corev1.PodSpec{NodeSelector: selector}
		if !isEmptyTerm(term) { // an empty term matches no node; here it stands for none
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}}
		}
		match := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec})
		var pools []string
		for _, n := range candidates {
			if ok, err := match.Match(n); err == nil && ok {
				pools = append(pools, nodePool(n))
			}
		}
		if len(pools) > 0 {
			return pools, ""
		}
		// No node it names satisfies it now: judged by the pool it names, if any.
		named, _ := valuesIn(selector, term.MatchExpressions, LabelPool)
		if len(named) == 1 {
			return named, ""
		}
		return nil, ""
	}
	named, bounded := valuesIn(selector, term.MatchExpressions, LabelPool)
	if !bounded {
		return nil, fmt.Sprintf("names no pool (%s In), node (matchFields %s In) or hostname (%s In)", LabelPool, fieldNodeName, LabelHostname)
	}
	var live []string
	for _, p := range named {
		if nodes.PoolHasMembers(p) {
			live = append(live, p)
		}
	}
	if len(live) == 0 && len(named) == 1 {
		return named, "" // as nodeSelector runwhere.ai/pool=P: P's pod before it has nodes
	}
	return live, ""
}

// namedNodes are the nodes a term names (ANDed with the nodeSelector) by name or
// hostname, when it names any.
func namedNodes(selector map[string]string, term corev1.NodeSelectorTerm, nodes NodeView) ([]*corev1.Node, bool) {
	names, byName := fieldValuesIn(term.MatchFields, fieldNodeName)
	hosts, byHost := valuesIn(selector, term.MatchExpressions, LabelHostname)
	if !byName && !byHost {
		return nil, false
	}
	var out []*corev1.Node
	if byName {
		for _, name := range names {
			if n := nodes.NodeNamed(name); n != nil {
				out = append(out, n)
			}
		}
		return out, true // the hostnames, if any, are checked by the match
	}
	for _, h := range hosts {
		out = append(out, nodes.NodesWithHostname(h)...)
	}
	return out, true
}

// valuesIn are the values key may take by the nodeSelector and the term's In
// requirements on it (their intersection), and whether any of them bounds the key.
func valuesIn(selector map[string]string, exprs []corev1.NodeSelectorRequirement, key string) ([]string, bool) {
	var sets [][]string
	if v, ok := selector[key]; ok {
		sets = append(sets, []string{v})
	}
	for _, e := range exprs {
		if e.Key == key && e.Operator == corev1.NodeSelectorOpIn {
			sets = append(sets, e.Values)
		}
	}
	return intersect(sets), len(sets) > 0
}

func fieldValuesIn(fields []corev1.NodeSelectorRequirement, key string) ([]string, bool) {
	var sets [][]string
	for _, f := range fields {
		if f.Key == key && f.Operator == corev1.NodeSelectorOpIn {
			sets = append(sets, f.Values)
		}
	}
	return intersect(sets), len(sets) > 0
}

// intersect is the values every set holds, in the first set's order, without repeats.
func intersect(sets [][]string) []string {
	if len(sets) == 0 {
		return nil
	}
	var out []string
	for _, v := range sets[0] {
		in := !slices.Contains(out, v)
		for _, s := range sets[1:] {
			in = in && slices.Contains(s, v)
		}
		if in {
			out = append(out, v)
		}
	}
	return out
}

// nodePool is the pool node belongs to; "" for none (no label, or "default").
func nodePool(n *corev1.Node) string {
	if p := n.Labels[LabelPool]; p != DefaultPool {
		return p
	}
	return ""
}

func describePools(pools map[string]bool) string {
	var names []string
	for p := range pools {
		if p == "" {
			p = "no pool"
		} else {
			p = fmt.Sprintf("pool %q", p)
		}
		names = append(names, p)
	}
	slices.Sort(names)
	return strings.Join(names, " and ")
}

// describePin says what of the placement pins the pod, for the rules' messages.
func describePin(spec *corev1.PodSpec) string {
	a := spec.Affinity
	affinity := a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
	switch {
	case affinity && len(spec.NodeSelector) > 0:
		return "nodeSelector and required node affinity"
	case affinity:
		return "required node affinity"
	case len(spec.NodeSelector) == 1:
		for k, v := range spec.NodeSelector {
			return fmt.Sprintf("nodeSelector %s=%s", k, v)
		}
	}
	return "nodeSelector"
}
