package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// MaxTopologyLevels is Kueue's limit on a Topology's levels, kubernetes.io/hostname
// included.
const MaxTopologyLevels = 16

// TopologyStatusDomains bounds the fullest and freest domains a Pool's status lists.
const TopologyStatusDomains = 10

// Domain states.
const (
	DomainWhole    = "Whole"
	DomainDegraded = "Degraded"
	DomainOut      = "Out"
)

// TopologyPreset is the label set a real system writes on its nodes.
type TopologyPreset struct {
	// Levels are the label keys, coarsest first, without the hostname.
	Levels []string
	// Unit is the level a job of that system needs whole.
	Unit string
	// Writer is who writes the labels (for the docs and errors).
	Writer string
}

// TopologyPresets are the label sets of the systems litepool's users run.
var TopologyPresets = map[v1alpha1.TopologyPreset]TopologyPreset{
	// MindCluster's Volcano Ascend plugin; the super pod is what HCCS joins.
	v1alpha1.TopologyAscend: {
		Levels: []string{"huawei.com/topotree.superpodid", "huawei.com/topotree.rackid"},
		Unit:   "huawei.com/topotree.superpodid",
		Writer: "MindCluster (Volcano's Ascend plugin)",
	},
	// GPU feature discovery writes <ClusterUUID>.<CliqueID> once Fabric Manager is up:
	// the NVLink domain of an NVL72 rack.
	v1alpha1.TopologyNVIDIA: {
		Levels: []string{"nvidia.com/gpu.clique"},
		Unit:   "nvidia.com/gpu.clique",
		Writer: "NVIDIA GPU feature discovery",
	},
	v1alpha1.TopologyGKE: {
		Levels: []string{"cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"},
		Unit:   "cloud.google.com/gce-topology-subblock",
		Writer: "GKE",
	},
	v1alpha1.TopologyEKS: {
		Levels: []string{"topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3"},
		Unit:   "topology.k8s.aws/network-node-layer-3",
		Writer: "EKS",
	},
	v1alpha1.TopologyTopograph: {
		Levels: []string{"accelerator.topograph.run/domain"},
		Unit:   "accelerator.topograph.run/domain",
		Writer: "topograph",
	},
}

// Topology is a pool's resolved topology: its levels (coarsest first, without the
// hostname), its unit level and the per-domain floor.
type Topology struct {
	Levels            []string
	Unit              string
	MinNodesPerDomain int32
}

// HasTopology says whether a pool declares a topology.
func HasTopology(pool *v1alpha1.Pool) bool { return pool != nil && pool.Spec.Topology != nil }

// ResolveTopology resolves and checks a pool's spec.topology (rule R1): a preset or
// levels, no duplicate, the hostname only last, at most Kueue's 16 levels with the
// hostname, a unit among the levels. The hostname written last is dropped: it is
// implied.
func ResolveTopology(spec *v1alpha1.TopologySpec) (Topology, error) {
	t := Topology{Levels: spec.Levels, Unit: spec.Unit, MinNodesPerDomain: max(spec.MinNodesPerDomain, 1)}
	if spec.Preset != "" {
		p, ok := TopologyPresets[spec.Preset]
		if !ok {
			return t, fieldViolationf("R1", "spec.topology.preset", "unknown topology preset %q: use one of %s, or list the node label keys in spec.topology.levels", spec.Preset, strings.Join(PresetNames(), ", "))
		}
		if len(spec.Levels) > 0 {
			return t, fieldViolationf("R1", "spec.topology.levels", "spec.topology sets both preset %q and levels: set one of them", spec.Preset)
		}
		t.Levels = p.Levels
		if t.Unit == "" {
			t.Unit = p.Unit
		}
	}
	levels, err := checkLevels(t.Levels)
	if err != nil {
		return t, err
	}
	t.Levels = levels
	if t.Unit == "" {
		t.Unit = levels[len(levels)-1]
	}
	if !slices.Contains(levels, t.Unit) {
		return t, fieldViolationf("R1", "spec.topology.unit", "spec.topology.unit %q is not one of the levels %s: name the level a job needs whole", t.Unit, strings.Join(levels, ", "))
	}
	return t, nil
}

// checkLevels is levels without a last hostname, or why they are refused.
func checkLevels(levels []string) ([]string, error) {
	if len(levels) == 0 {
		return nil, fieldViolationf("R1", "spec.topology.levels", "spec.topology has no levels: set a preset (%s) or list node label keys, coarsest first", strings.Join(PresetNames(), ", "))
	}
	if len(levels) > MaxTopologyLevels || (len(levels) == MaxTopologyLevels && levels[len(levels)-1] != corev1.LabelHostname) {
		return nil, fieldViolationf("R1", "spec.topology.levels", "spec.topology.levels has %d levels: Kueue takes at most %d with the implied %s, so list at most %d", len(levels), MaxTopologyLevels, corev1.LabelHostname, MaxTopologyLevels-1)
	}
	seen := map[string]bool{}
	for i, l := range levels {
		switch {
		case l == "":
			return nil, fieldViolationf("R1", fmt.Sprintf("spec.topology.levels[%d]", i), "level %d is empty: each level is a node label key", i)
		case seen[l]:
			return nil, fieldViolationf("R1", fmt.Sprintf("spec.topology.levels[%d]", i), "level %q is listed twice: each level is a different node label key", l)
		case l == corev1.LabelHostname && i != len(levels)-1:
			return nil, fieldViolationf("R1", fmt.Sprintf("spec.topology.levels[%d]", i), "%s may only be the last level (it is implied last): remove it or move it to the end", l)
		}
		seen[l] = true
	}
	if levels[len(levels)-1] == corev1.LabelHostname {
		levels = levels[:len(levels)-1]
	}
	if len(levels) == 0 {
		return nil, fieldViolationf("R1", "spec.topology.levels", "spec.topology.levels lists only %s: add the label keys of the domains above it", corev1.LabelHostname)
	}
	return levels, nil
}

// PresetNames are the presets' names, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(TopologyPresets))
	for p := range TopologyPresets {
		names = append(names, string(p))
	}
	slices.Sort(names)
	return names
}

// DomainOf is the unit domain node belongs to: the values of the levels from the
// coarsest down to the unit, joined by "/" (a rack id is unique only within its super
// pod, as Kueue keys its domains), and false when the node lacks one of them.
func (t Topology) DomainOf(node *corev1.Node) (string, bool) {
	var b strings.Builder
	for _, l := range t.Levels {
		v, ok := node.Labels[l]
		if !ok || v == "" {
			return "", false
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(v)
		if l == t.Unit {
			break
		}
	}
	return b.String(), true
}

// GroupByDomain groups nodes by unit domain; outside are the nodes in none (a level's
// label missing): they are shown apart, never dropped.
func (t Topology) GroupByDomain(nodes []*corev1.Node) (domains map[string][]*corev1.Node, outside []*corev1.Node) {
	domains = map[string][]*corev1.Node{}
	for _, n := range nodes {
		if d, ok := t.DomainOf(n); ok {
			domains[d] = append(domains[d], n)
		} else {
			outside = append(outside, n)
		}
	}
	return domains, outside
}
