package describe

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
)

// describe pool shows the topology, the largest free block and the domains by state:
// super pods sp1 (two idle members of 8), sp2 (one member cordoned), and a member
// without the label.
func TestDescribePoolTopology(t *testing.T) {
	objs := []runtime.Object{&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a3"}, Spec: v1alpha1.PoolSpec{
		Type: v1alpha1.PoolTypeTraining, Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"},
		Topology: &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2}}}}
	for i, sp := range []string{"sp1", "sp1", "sp2", "sp2", ""} {
		n := fixtures.Node(fmt.Sprintf("n%d", i), "train-a3", "", "A100-80G", 8, true)
		if sp != "" {
			n.Labels["huawei.com/topotree.superpodid"], n.Labels["huawei.com/topotree.rackid"] = sp, "r1"
		}
		n.Spec.Unschedulable = i == 3
		objs = append(objs, n)
	}
	r := kittest.Run(kittest.NewFactory(t, objs...), NewCmdDescribe, "", "pool", "train-a3")
	require.NoError(t, r.Err)
	assert.Contains(t, r.Out, `Accelerators:        40 total, 0 used, 32 free (8 idle on members out of service)
Topology:            huawei.com/topotree.superpodid > huawei.com/topotree.rackid (unit huawei.com/topotree.superpodid, at least 2 nodes per domain)
Largest Free Block:  fits 16 in one huawei.com/topotree.superpodid domain
Domains:             2: 1 whole (1 of them free), 1 degraded, 0 out, 0 mixed; 1 members outside every domain
Driver Versions:     535.104.05
`)
}
