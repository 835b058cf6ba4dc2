package get

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// topologyCluster: pool train-a3 (Ascend preset) of 3 super pods of 2 nodes of 16 NPUs:
// sp1 whole and idle, sp2 whole with 12 in use, sp3 degraded (one member tainted by
// another tool); sp4 mixed (a 910B and a 310P node); one member without the super pod
// label. Pool flat has no topology.
func topologyCluster(t *testing.T) *kittest.Factory {
	objs := []runtime.Object{
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a3"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Ascend910B", ResourceName: "huawei.com/Ascend910"},
			Topology:    &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend}}},
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "flat"}},
		fixtures.Node("f1", "flat", "", "A100-80G", 8, true),
		fixtures.Pod("ai", "job-0", "a3-sp2-1", "0", nil),
	}
	npu := func(name, superPod, chip string, mutate ...func(*corev1.Node)) *corev1.Node {
		n := fixtures.Node(name, "train-a3", "", "", 0, true)
		n.Labels[policy.LabelNPUChipName] = chip
		n.Status.Allocatable = corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("16")}
		if superPod != "" {
			n.Labels["huawei.com/topotree.superpodid"] = superPod
			n.Labels["huawei.com/topotree.rackid"] = "rack-1"
		}
		for _, m := range mutate {
			m(n)
		}
		return n
	}
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}
	}
	objs = append(objs, npu("a3-sp1-0", "sp1", "910B3"), npu("a3-sp1-1", "sp1", "910B3"),
		npu("a3-sp2-0", "sp2", "910B3"), npu("a3-sp2-1", "sp2", "910B3"),
		npu("a3-sp3-0", "sp3", "910B3"), npu("a3-sp3-1", "sp3", "910B3", tainted),
		npu("a3-sp4-0", "sp4", "910B3"), npu("a3-sp4-1", "sp4", "310P3"),
		npu("a3-x", "", "910B3"))
	job := fixtures.Requesting(fixtures.Pod("ai", "job-1", "a3-sp2-0", "0", nil), "huawei.com/Ascend910", "12")
	objs = append(objs, job)
	return kittest.NewFactory(t, objs...)
}

func TestGetDomains(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		out  string
	}{
		{"domains", []string{"domains"}, `POOL       DOMAIN      NODES   ACCELERATORS   STATE
train-a3   sp1         2/2     32/32          Whole
train-a3   sp2         2/2     20/32          Whole
train-a3   sp3         1/2     16/16          Degraded
train-a3   sp4         2/2     32/32          Whole,Mixed
train-a3   <outside>   1/1     16/16          Outside
`},
		{"domains wide", []string{"domains", "--pool", "train-a3", "-o", "wide"}, `POOL       DOMAIN      NODES   ACCELERATORS   STATE         UNIT                             MEMBERS             HELD OUT
train-a3   sp1         2/2     32/32          Whole         huawei.com/topotree.superpodid   a3-sp1-0,a3-sp1-1   <none>
train-a3   sp2         2/2     20/32          Whole         huawei.com/topotree.superpodid   a3-sp2-0,a3-sp2-1   <none>
train-a3   sp3         1/2     16/16          Degraded      huawei.com/topotree.superpodid   a3-sp3-0,a3-sp3-1   a3-sp3-1
train-a3   sp4         2/2     32/32          Whole,Mixed   huawei.com/topotree.superpodid   a3-sp4-0,a3-sp4-1   <none>
train-a3   <outside>   1/1     16/16          Outside       huawei.com/topotree.superpodid   a3-x                <none>
`},
		{"domains name", []string{"domains", "-o", "name"}, "domain.runwhere.ai/train-a3.sp1\ndomain.runwhere.ai/train-a3.sp2\ndomain.runwhere.ai/train-a3.sp3\ndomain.runwhere.ai/train-a3.sp4\ndomain.runwhere.ai/train-a3.<outside>\n"},
		{"domains jsonpath", []string{"domains", "-o", `jsonpath={range .items[*]}{.spec.domain}={.status.acceleratorFree}/{.status.state} {end}`},
			"sp1=32/Whole sp2=20/Whole sp3=16/Degraded sp4=32/Whole,Mixed <outside>=16/Outside "},
		// GPU FREE is what the domains' free add up to (32+20+16+32+16 = 116): the held-out
		// a3-sp3-1's 16 are in the total, not in free (before, free was 144-12 = 132).
		{"pools wide: largest free block and whole free domains", []string{"pools", "-o", "wide"}, `POOL NAME   STATUS    GPU TOTAL   GPU USED   GPU FREE   NODE COUNT   TYPE               ACCELERATOR   RESOURCE               HEALTHY   FAULTY   DRIVER VERSIONS   LARGEST FREE BLOCK   WHOLE FREE DOMAINS
flat        Running   8           0          8          1            Training           A100-80G      nvidia.com/gpu         1         0        535.104.05        <none>               <none>
train-a3    Running   144         12         116        9            Training           Ascend910B    huawei.com/Ascend910   9         0        <none>            32                   2/4
default     Empty     0           0          0          0            <no pool object>   <none>        <none>                 0         0        <none>            <none>               <none>
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := kittest.Run(topologyCluster(t), NewCmdGet, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
		})
	}
}

func TestGetDomainsRefusals(t *testing.T) {
	r := kittest.Run(topologyCluster(t), NewCmdGet, "", "domains", "--pool", "flat")
	assert.EqualError(t, r.Err, `pool "flat" has no spec.topology: its nodes form no domains (docs/topology.md)`)
	r = kittest.Run(topologyCluster(t), NewCmdGet, "", "domains", "--pool", "nope")
	assert.EqualError(t, r.Err, `pools.runwhere.ai "nope" not found`)
	r = kittest.Run(cluster(t), NewCmdGet, "", "domains")
	require.NoError(t, r.Err)
	assert.Equal(t, []string{"", "No resources found: no pool declares spec.topology\n"}, []string{r.Out, r.ErrOut})
}
