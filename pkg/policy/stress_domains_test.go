package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func TestCheckStressDomains(t *testing.T) {
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	racks := []*corev1.Node{node("a1", map[string]string{"nvidia.com/gpu.clique": "a"}), node("lone", nil)}
	unlabelled := []*corev1.Node{node("x1", nil), node("x2", nil)}
	withTopology := func(spec *v1alpha1.TopologySpec) *v1alpha1.Pool {
		return &v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Topology: spec}}
	}
	for _, tc := range []struct {
		name    string
		pool    *v1alpha1.Pool
		members []*corev1.Node
		rule    string
		field   string
		err     string
	}{
		{name: "a pool with domains", pool: withTopology(&v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA}), members: racks},
		{name: "a pool without topology", pool: withTopology(nil), members: racks, rule: "T4", field: FieldStressDomains,
			err: `[T4] spec.domains tests a pool by unit domain, and pool "p" has no topology (no spec.topology): run without --domains (spec.domains) to test node by node, or declare the pool's topology first`},
		{name: "no Pool object", members: racks, rule: "T4", field: FieldStressDomains, err: `pool "p" has no topology`},
		{name: "a topology no member is labelled for", pool: withTopology(&v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA}), members: unlabelled,
			rule: "T4", field: FieldStressDomains,
			err: `[T4] spec.domains tests a pool by unit domain, and none of pool "p"'s 2 node(s) is in one (each lacks a label of nvidia.com/gpu.clique): run without --domains (spec.domains), or label the nodes`},
		{name: "an invalid topology is R1's", pool: withTopology(&v1alpha1.TopologySpec{Preset: "nope"}), members: racks,
			rule: "R1", field: "spec.topology.preset", err: `unknown topology preset "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckStressDomains(tc.pool, "p", tc.members)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
			assert.Equal(t, []string{tc.rule}, Rules(err))
			var v *Violation
			require.ErrorAs(t, err, &v)
			assert.Equal(t, tc.field, v.Field)
		})
	}
}
