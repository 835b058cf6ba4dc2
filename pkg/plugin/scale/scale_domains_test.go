package scale

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
)

const superPodLabel = "huawei.com/topotree.superpodid"

// superPods is the example: pool train (Ascend preset, minNodesPerDomain 2) of
// 16 nodes node-00..node-15 with 8 GPUs each, node i in super node sp-(i%4); pods of 8
// GPUs run on node-00, node-04 (sp-0) and node-03 (sp-3); sp-1 and sp-2 are idle.
func superPods(t *testing.T) *kittest.Factory {
	objs := []runtime.Object{&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining,
		MinNodes: 1, Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"},
		Topology: &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2}}}}
	for i := range 16 {
		n := fixtures.Node(fmt.Sprintf("node-%02d", i), "train", "", "A100-80G", 8, true)
		n.Labels[superPodLabel] = fmt.Sprintf("sp-%d", i%4)
		n.Labels["huawei.com/topotree.rackid"] = "r0"
		objs = append(objs, n)
	}
	for _, i := range []int{0, 4, 3} {
		objs = append(objs, fixtures.Pod("ai", fmt.Sprintf("job-%02d", i), fmt.Sprintf("node-%02d", i), "8", nil))
	}
	return kittest.NewFactory(t, objs...)
}

// The domain rule takes the idle super node sp-2 whole, where the flat rule would take
// node-15, node-14, node-13 and node-12, one of each; the dry run says so, with the
// largest free block before and after, and changes nothing.
func TestScaleDownByDomainDryRun(t *testing.T) {
	f := superPods(t)
	r := kittest.Run(f, NewCmdScale, "", "train", "--nodes", "12", "--dry-run=client")
	require.NoError(t, r.Err)
	var want strings.Builder
	want.WriteString("plan: domain sp-2 leaves whole\n")
	want.WriteString("largest free block: 32 nvidia.com/gpu in domain sp-1 before, 32 nvidia.com/gpu in domain sp-1 after\n")
	for _, verb := range []string{"cordoned", "drained"} {
		for _, n := range []string{"node-14", "node-10", "node-06", "node-02"} {
			fmt.Fprintf(&want, "node/%s %s (dry run)\n", n, verb)
		}
	}
	for _, n := range []string{"node-14", "node-10", "node-06", "node-02"} {
		fmt.Fprintf(&want, "node/%s removed from pool train (dry run)\nnode/%s uncordoned (dry run)\n", n, n)
	}
	want.WriteString("pool.runwhere.ai/train scaled from 16 to 12 node(s) (dry run)\n")
	assert.Equal(t, want.String(), r.Out)
	assert.Empty(t, r.ErrOut)
	for n, s := range state(t, f, "node-02", "node-06", "node-10", "node-14") {
		assert.Equal(t, "pool=train", s, n)
	}
}

// --remove that would leave a super node below its floor without taking it whole is
// refused, naming the domain, its size, the floor and the whole domain's nodes.
func TestScaleDownByDomainRefusesBelowFloor(t *testing.T) {
	f := superPods(t)
	r := kittest.Run(f, NewCmdScale, "", "train", "--remove", "node-02,node-06,node-10", "--yes")
	assert.EqualError(t, r.Err, `[N3] domain "sp-2" of pool "train" has 4 node(s), 4 in service, and minNodesPerDomain 2: this would leave 1 in service; take at most 2 of its nodes in service, or the whole domain (node-02, node-06, node-10, node-14), or cordon the ones that stay first`)
	assert.Empty(t, r.Out)
	for n, s := range state(t, f, "node-02", "node-06", "node-10", "node-14") {
		assert.Equal(t, "pool=train", s, n, "refused: nothing changes")
	}
}
