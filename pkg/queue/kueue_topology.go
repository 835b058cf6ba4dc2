package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// KueueTopology is Kueue's Topology (TAS): the pool's levels and the hostname.
var KueueTopology = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Topology"}

var topologyFields = []string{"levels"}

// Kueue makes a Topology's levels immutable, and a flavor's topologyName, nodeLabels and
// tolerations immutable once topologyName is set. So a pool with a topology names both
// objects by a hash of what cannot change: a change of levels (or of the exclusive
// toleration) writes a new Topology and a new flavor, the ClusterQueue moves to the new
// flavor in the same sync, and the old ones are deleted (Kueue keeps them, by its
// finalizers, while admitted workloads still use them). Workloads admitted before keep
// running on the nodes they were given; new ones are placed by the new levels.

// poolTopology is the pool's resolved topology, or false when it has none (or an
// invalid one, which R1 refuses: the queue is then written flat).
func poolTopology(pool *v1alpha1.Pool) (policy.Topology, bool) {
	if !policy.HasTopology(pool) {
		return policy.Topology{}, false
	}
	t, err := policy.ResolveTopology(pool.Spec.Topology)
	return t, err == nil
}

// TopologyName is the name of the pool's Kueue Topology ("" without a topology).
func TopologyName(pool *v1alpha1.Pool) string {
	t, ok := poolTopology(pool)
	if !ok {
		return ""
	}
	return pool.Name + "-" + shortHash(append(t.Levels, corev1.LabelHostname)...)
}

// FlavorName is the name of the pool's ResourceFlavor: the pool's own without a
// topology; with one, a name that changes whenever a field Kueue freezes would.
func FlavorName(pool *v1alpha1.Pool) string {
	top := TopologyName(pool)
	if top == "" {
		return pool.Name
	}
	return pool.Name + "-" + shortHash(top, strconv.FormatBool(pool.Spec.Exclusive))
}

func shortHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:4])
}

// KueueTopologyFor is the pool's Kueue Topology, nil without a topology: its levels,
// coarsest first, and kubernetes.io/hostname last, so that TAS places pods on nodes.
func KueueTopologyFor(pool *v1alpha1.Pool) *unstructured.Unstructured {
	t, ok := poolTopology(pool)
	if !ok {
		return nil
	}
	var levels []any
	for _, l := range append(t.Levels, corev1.LabelHostname) {
		levels = append(levels, map[string]any{"nodeLabel": l})
	}
	u := object(KueueTopology, "", pool, map[string]any{"levels": levels})
	u.SetName(TopologyName(pool))
	return u
}
