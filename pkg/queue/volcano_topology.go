package queue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// hyperNodeFields are the HyperNode spec fields litepool owns (all of them).
var hyperNodeFields = []string{"tier", "tierName", "members"}

// HyperNode is one domain's HyperNode as litepool writes it.
type HyperNode struct {
	Name string
	// Level is the index of the domain's level in the pool's levels (coarsest 0).
	Level int
	// Domain is the domain's values from the coarsest level down to its own, joined
	// by "/" (policy.Topology.DomainOf's form at the unit level).
	Domain string
	Object *unstructured.Unstructured
}

// VolcanoHyperNodesFor are the HyperNodes of pool's domains, one per domain of each
// level that holds a member, sorted by name. The finest level is tier 1 and selects its
// nodes by labelMatch on every level's key down to its own and on the pool's label (so
// it follows members joining and leaving without a write); each coarser level is one
// tier up and selects the HyperNodes of its domains below by exactMatch (their names are
// known). Members without a level's label are in no HyperNode of that level or below.
func VolcanoHyperNodesFor(pool *v1alpha1.Pool, t policy.Topology, members []*corev1.Node) []HyperNode {
	levels := len(t.Levels)
	domains := make([]map[string]bool, levels) // level -> domain paths
	children := map[string]map[string]bool{}   // parent path -> child paths
	for i := range domains {
		domains[i] = map[string]bool{}
	}
	for _, n := range members {
		var path []string
		for i, l := range t.Levels {
			val := n.Labels[l]
			if val == "" {
				break
			}
			parent := strings.Join(path, "/")
			path = append(path, val)
			p := strings.Join(path, "/")
			domains[i][p] = true
			if i > 0 {
				if children[parent] == nil {
					children[parent] = map[string]bool{}
				}
				children[parent][p] = true
			}
		}
	}
	names := hyperNodeNames(pool.Name, domains)
	var out []HyperNode
	for i := range domains {
		for _, p := range slices.Sorted(maps.Keys(domains[i])) {
			spec := map[string]any{"tier": int64(levels - i), "tierName": t.Levels[i]}
			if i == levels-1 {
				spec["members"] = []any{nodeMember(pool.Name, t.Levels, strings.Split(p, "/"))}
			} else {
				var ms []any
				for _, c := range slices.Sorted(maps.Keys(children[p])) {
					ms = append(ms, map[string]any{"type": "HyperNode",
						"selector": map[string]any{"exactMatch": map[string]any{"name": names[c]}}})
				}
				spec["members"] = ms
			}
			u := object(VolcanoHyperNode, "", pool, spec)
			u.SetName(names[p])
			u.SetAnnotations(map[string]string{policy.AnnotationHyperNodeDomain: p, policy.AnnotationHyperNodeLevel: t.Levels[i]})
			out = append(out, HyperNode{Name: names[p], Level: i, Domain: p, Object: u})
		}
	}
	slices.SortFunc(out, func(a, b HyperNode) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// nodeMember selects the pool's nodes of one finest-level domain by their labels.
func nodeMember(pool string, levels, values []string) map[string]any {
	match := map[string]any{policy.LabelPool: pool}
	for i, v := range values {
		match[levels[i]] = v
	}
	return map[string]any{"type": "Node", "selector": map[string]any{"labelMatch": map[string]any{"matchLabels": match}}}
}

// hyperNodeNames names each domain path <pool>-<values joined by "-">, lowercased;
// a path whose name would not be a valid object name, or would be another's, is named
// <pool>-<level>-<hash of the path> instead.
func hyperNodeNames(pool string, domains []map[string]bool) map[string]string {
	names, taken := map[string]string{}, map[string]int{}
	readable := func(p string) string {
		return pool + "-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(p))
	}
	for i := range domains {
		for p := range domains[i] {
			taken[readable(p)]++
		}
	}
	for i := range domains {
		for p := range domains[i] {
			n := readable(p)
			if taken[n] > 1 || len(validation.IsDNS1123Subdomain(n)) > 0 {
				n = fmt.Sprintf("%s-%d-%s", pool, i, shortHash(p))
			}
			names[p] = n
		}
	}
	return names
}

// syncHyperNodes writes the pool's HyperNodes and deletes its own that no domain
// needs; skipped says why none are written (no topology says nothing).
func (v Volcano) syncHyperNodes(ctx context.Context, pool *v1alpha1.Pool) (written int32, skipped string, err error) {
	t, ok := poolTopology(pool)
	if ok {
		on, err := v.LabelDiscoveryOn(ctx)
		if err != nil {
			return 0, "", err
		}
		if on {
			key := v.ConfigMap
			if key.Name == "" {
				key = VolcanoDiscoveryConfigMap
			}
			skipped = fmt.Sprintf("Volcano discovers HyperNodes from node labels itself (networkTopologyDiscovery with source: label in ConfigMap %s): litepool writes none, so as not to fight it", key)
			ok = false
		}
	}
	var want []HyperNode
	if ok {
		var nodes corev1.NodeList
		if err := v.Client.List(ctx, &nodes, client.MatchingLabels{policy.LabelPool: pool.Name}); err != nil {
			return 0, "", err
		}
		members := make([]*corev1.Node, len(nodes.Items))
		for i := range nodes.Items {
			members[i] = &nodes.Items[i]
		}
		want = VolcanoHyperNodesFor(pool, t, members)
	}
	var keep []string
	var conflict error
	for _, h := range want {
		err := v.apply(ctx, pool, h.Object, hyperNodeFields)
		switch {
		case IsNotInstalled(err):
			return 0, fmt.Sprintf("the cluster does not serve %s HyperNode (Volcano before v1.12): no HyperNodes written", VolcanoHyperNode.GroupVersion()), nil
		case IsNotOwned(err):
			conflict = err
		case err != nil:
			return 0, "", err
		default:
			keep, written = append(keep, h.Name), written+1
		}
	}
	err = v.prune(ctx, pool, VolcanoHyperNode.GroupVersion().WithKind("HyperNodeList"), keep)
	if apimeta.IsNoMatchError(err) {
		err = nil
	}
	if err != nil {
		return written, skipped, err
	}
	return written, skipped, conflict
}
