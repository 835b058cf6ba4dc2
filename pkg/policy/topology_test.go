package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func TestResolveTopology(t *testing.T) {
	ascend, err := ResolveTopology(&v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend})
	require.NoError(t, err)
	assert.Equal(t, Topology{Levels: []string{"huawei.com/topotree.superpodid", "huawei.com/topotree.rackid"}, Unit: "huawei.com/topotree.superpodid", MinNodesPerDomain: 1}, ascend)

	own, err := ResolveTopology(&v1alpha1.TopologySpec{Levels: []string{"block", "rack", corev1.LabelHostname}, MinNodesPerDomain: 2})
	require.NoError(t, err)
	assert.Equal(t, Topology{Levels: []string{"block", "rack"}, Unit: "rack", MinNodesPerDomain: 2}, own, "the finest level above the hostname is the unit; a last hostname is implied")

	many := make([]string, 16)
	for i := range many {
		many[i] = string(rune('a' + i))
	}
	for name, tc := range map[string]struct {
		spec  v1alpha1.TopologySpec
		field string
		msg   string
	}{
		"unknown preset":    {v1alpha1.TopologySpec{Preset: "Cray"}, "spec.topology.preset", `unknown topology preset "Cray": use one of Ascend, EKS, GKE, NVIDIA, Topograph`},
		"preset and levels": {v1alpha1.TopologySpec{Preset: v1alpha1.TopologyGKE, Levels: []string{"a"}}, "spec.topology.levels", "sets both"},
		"no levels":         {v1alpha1.TopologySpec{}, "spec.topology.levels", "has no levels"},
		"duplicate":         {v1alpha1.TopologySpec{Levels: []string{"a", "b", "a"}}, "spec.topology.levels[2]", `level "a" is listed twice`},
		"hostname first":    {v1alpha1.TopologySpec{Levels: []string{corev1.LabelHostname, "rack"}}, "spec.topology.levels[0]", "may only be the last level"},
		"only hostname":     {v1alpha1.TopologySpec{Levels: []string{corev1.LabelHostname}}, "spec.topology.levels", "lists only"},
		"too many":          {v1alpha1.TopologySpec{Levels: many}, "spec.topology.levels", "Kueue takes at most 16"},
		"unit elsewhere":    {v1alpha1.TopologySpec{Levels: []string{"a", "b"}, Unit: "c"}, "spec.topology.unit", `"c" is not one of the levels a, b`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ResolveTopology(&tc.spec)
			require.Error(t, err)
			var v *Violation
			require.ErrorAs(t, err, &v)
			assert.Equal(t, "R1", v.Rule)
			assert.Equal(t, tc.field, v.Field)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	withHost := append(many[:15:15], corev1.LabelHostname)
	_, err = ResolveTopology(&v1alpha1.TopologySpec{Levels: withHost})
	assert.NoError(t, err, "15 levels and the hostname are Kueue's 16")
}

func TestGroupByDomain(t *testing.T) {
	top := Topology{Levels: []string{"pod", "rack"}, Unit: "pod"}
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	nodes := []*corev1.Node{
		node("a", map[string]string{"pod": "p1", "rack": "r1"}),
		node("b", map[string]string{"pod": "p1", "rack": "r2"}),
		node("c", map[string]string{"pod": "p2"}),
		node("d", map[string]string{"rack": "r1"}),
	}
	domains, outside := top.GroupByDomain(nodes)
	assert.Len(t, domains["p1"], 2)
	assert.Len(t, domains["p2"], 1, "a member needs the levels down to the unit only")
	require.Len(t, outside, 1)
	assert.Equal(t, "d", outside[0].Name)

	racks := Topology{Levels: []string{"pod", "rack"}, Unit: "rack"}
	domains, _ = racks.GroupByDomain(nodes)
	assert.Contains(t, domains, "p1/r1", "a rack is named within its super pod")
	assert.NotContains(t, domains, "r1")
}
