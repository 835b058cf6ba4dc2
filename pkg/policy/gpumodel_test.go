package policy

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestSameGPUModel(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"a10-24g", "NVIDIA-A10", true},
		{"A10", "a10-24g", true},
		{"NVIDIA-A10", "NVIDIA-A10", true},
		{"A100-80G", "NVIDIA-A100-SXM4-80GB", true},
		{"A100", "NVIDIA-A100-PCIE-40GB", true},
		{"H100-80G", "NVIDIA-H100-80GB-HBM3", true},
		{"RTX4090-24G", "NVIDIA-GeForce-RTX-4090", true},
		{"RTX-A6000", "NVIDIA-RTX-A6000", true},
		{"A6000", "NVIDIA-RTX-A6000", true},
		{"V100", "Tesla-V100-SXM2-16GB", true},
		{"Snt9B", "910B3", true},
		{"Snt9B", "Ascend910B", true},
		{"Ascend310P", "huawei-Ascend310P", true},
		{"", "", true},

		{"A10", "NVIDIA-A100-SXM4-80GB", false},
		{"NVIDIA-A10", "NVIDIA-A100-SXM4-80GB", false}, // the vendor word is no model
		{"A100-40G", "NVIDIA-A100-SXM4-80GB", false},
		{"A100-80G", "A100-40G", false},
		{"RTX-4090", "RTX-3090", false},
		{"RTX-A6000", "RTX-A5000", false},
		{"L40", "NVIDIA-L40S", false},
		{"A100-80G", "910B3", false},
		{"Snt9B", "Snt3", false},
		{"A10", "", false},
		{"NVIDIA", "NVIDIA-A10", false},
	} {
		assert.Equal(t, c.same, SameGPUModel(c.a, c.b), "SameGPUModel(%q, %q)", c.a, c.b)
		assert.Equal(t, c.same, SameGPUModel(c.b, c.a), "SameGPUModel(%q, %q)", c.b, c.a)
	}
}

func TestCheckJoinByModel(t *testing.T) {
	gpu := func(name string, labels map[string]string) *corev1.Node {
		n := node(name, labels)
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
		return n
	}
	p := pool("dev-pool", "a10-24g", 1)
	for _, c := range []struct {
		name    string
		node    *corev1.Node
		wantErr string
	}{
		{name: "GFD product of the same model", node: gpu("n", map[string]string{LabelNVIDIAProduct: "NVIDIA-A10"})},
		{name: "gpu-type of the same model, another spelling", node: gpu("n", map[string]string{LabelGPUType: "A10"})},
		{name: "both labels agree", node: gpu("n", map[string]string{LabelGPUType: "a10-24g", LabelNVIDIAProduct: "NVIDIA-A10"})},
		{name: "a GPU node that states no model yet", node: gpu("n", nil)},
		{name: "GFD product of another model", node: gpu("n", map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB"}),
			wantErr: `[N2] node "n" (its device plugin reports nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB) cannot join pool "dev-pool": the pool takes only a10-24g nodes; choose a node of model a10-24g or a pool for NVIDIA-A100-SXM4-80GB nodes`},
		{name: "gpu-type that its device plugin contradicts", node: gpu("n", map[string]string{LabelGPUType: "A10", LabelNVIDIAProduct: "NVIDIA-H100-80GB-HBM3"}),
			wantErr: `[N2] node "n" (its device plugin reports nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3) cannot join pool "dev-pool": the pool takes only a10-24g nodes; choose a node of model a10-24g or a pool for NVIDIA-H100-80GB-HBM3 nodes`},
		{name: "a CPU node", node: node("n", nil),
			wantErr: `[N2] node "n" (gpu-type none) cannot join pool "dev-pool": the pool takes only a10-24g nodes; choose a node labelled runwhere.ai/gpu-type=a10-24g or a pool for none nodes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckJoin(p, c.node)
			if c.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, c.wantErr)
		})
	}
}

// nodeCluster is the nodes of a cluster with no Pool objects, as the webhook's catalog
// sees them: pools of labels, their members' models read as the catalogs read them.
type nodeCluster map[string]*corev1.Node

func (c nodeCluster) Pool(name string) (PoolInfo, bool) {
	info := PoolInfo{Name: name}
	var types []string
	for _, n := range c {
		if n.Labels[LabelPool] == name {
			info.Members++
			types = append(types, GPUType(n))
		}
	}
	info.GPUTypes = DistinctSorted(types)
	return info, info.Members > 0
}

func (c nodeCluster) PoolNames() []string          { return nil }
func (c nodeCluster) WorkloadPods(string) []string { return nil }

// apply admits a change of node's labels (nil value: removed) as a patch would make it
// and stores the result when admitted.
func (c nodeCluster) apply(name string, labels map[string]*string) error {
	old := c[name]
	n := old.DeepCopy()
	for k, v := range labels {
		if v == nil {
			delete(n.Labels, k)
			continue
		}
		n.Labels[k] = *v
	}
	if _, err := AdmitNode(n, old, c); err != nil {
		return err
	}
	c[name] = n
	return nil
}

// TestGpuctlJoinOrders replays gpuctl's pool creation (a request for the pool label
// and one for the gpu-type, per node, in either order) and its `label node pool=P`:
// N2 accepts both orders for nodes of the pool's model, and refuses a node of another
// model in both orders, with or without the GFD product label.
func TestGpuctlJoinOrders(t *testing.T) {
	str := func(s string) *string { return &s }
	poolLabel := map[string]*string{LabelPool: str("dev-pool")}
	typeLabel := func(t string) map[string]*string { return map[string]*string{LabelGPUType: str(t)} }
	orders := map[string]func(gpuType string) []map[string]*string{
		"pool label first": func(gt string) []map[string]*string { return []map[string]*string{poolLabel, typeLabel(gt)} },
		"gpu-type first":   func(gt string) []map[string]*string { return []map[string]*string{typeLabel(gt), poolLabel} },
	}
	for _, c := range []struct {
		name               string
		product1, product2 string // GFD's nvidia.com/gpu.product of the two nodes ("" absent)
		type2              string // the gpu-type the file declares for the second node
		wantErr            map[string]string
	}{
		{name: "same model, GFD product present", product1: "NVIDIA-A10", product2: "NVIDIA-A10", type2: "a10-24g"},
		{name: "same model, GFD product absent", type2: "a10-24g"},
		{name: "same model, another spelling", product2: "NVIDIA-A10", type2: "A10"},
		{name: "another model, GFD product present", product1: "NVIDIA-A10", product2: "NVIDIA-A100-SXM4-80GB", type2: "A100-80G",
			wantErr: map[string]string{
				"pool label first": `[N2] node "x-2" (its device plugin reports nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB) cannot join pool "dev-pool": the pool takes only a10-24g nodes; choose a node of model a10-24g or a pool for NVIDIA-A100-SXM4-80GB nodes`,
				"gpu-type first":   `[N2] node "x-2" (gpu-type A100-80G) cannot join pool "dev-pool": the pool takes only a10-24g nodes; choose a node labelled runwhere.ai/gpu-type=a10-24g or a pool for A100-80G nodes`,
			}},
		{name: "another model, GFD product absent", type2: "A100-80G",
			wantErr: map[string]string{
				"pool label first": `[N2] node "x-2" (gpu-type A100-80G) cannot join pool "dev-pool": the pool takes only a10-24g nodes; choose a node labelled runwhere.ai/gpu-type=a10-24g or a pool for A100-80G nodes`,
				"gpu-type first":   `[N2] node "x-2" (gpu-type A100-80G) cannot join pool "dev-pool": the pool takes only a10-24g nodes; choose a node labelled runwhere.ai/gpu-type=a10-24g or a pool for A100-80G nodes`,
			}},
	} {
		for _, order := range slices.Sorted(maps.Keys(orders)) {
			t.Run(c.name+"/"+order, func(t *testing.T) {
				cluster := nodeCluster{}
				for name, product := range map[string]string{"x-1": c.product1, "x-2": c.product2} {
					n := node(name, map[string]string{})
					if product != "" {
						n.Labels[LabelNVIDIAProduct] = product
					}
					n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
					cluster[name] = n
				}
				for _, req := range orders[order]("a10-24g") {
					require.NoError(t, cluster.apply("x-1", req))
				}
				var err error
				for _, req := range orders[order](c.type2) {
					if err = cluster.apply("x-2", req); err != nil {
						break
					}
				}
				if want := c.wantErr[order]; want != "" {
					assert.EqualError(t, err, want)
					x2 := cluster["x-2"]
					assert.False(t, x2.Labels[LabelPool] == "dev-pool" && GPUType(x2) != "",
						"a node of another model must not end up in the pool with a model: %v", x2.Labels)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, "dev-pool", cluster["x-2"].Labels[LabelPool])

				// gpuctl's `label node x-3 pool=dev`: one request, the pool label.
				cluster["x-3"] = node("x-3", map[string]string{LabelNVIDIAProduct: "NVIDIA-A10"})
				assert.NoError(t, cluster.apply("x-3", poolLabel))
				cluster["x-4"] = node("x-4", map[string]string{LabelNVIDIAProduct: "NVIDIA-H100-80GB-HBM3"})
				assert.EqualError(t, cluster.apply("x-4", poolLabel),
					`[N2] node "x-4" (its device plugin reports nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3) cannot join pool "dev-pool": the pool takes only `+
						cluster.poolType("dev-pool")+` nodes; choose a node of model `+cluster.poolType("dev-pool")+` or a pool for NVIDIA-H100-80GB-HBM3 nodes`)
			})
		}
	}
}

func (c nodeCluster) poolType(name string) string {
	info, _ := c.Pool(name)
	return info.AcceleratorType()
}

// P5 compares by model too: a pool of labels whose members are labelled a10-24g and
// NVIDIA-A10 takes one model, and a gpuctl job's gpuType is judged against it.
func TestPodAcceleratorByModel(t *testing.T) {
	info := PoolInfo{Name: "dev-pool", Members: 2, GPUTypes: []string{"NVIDIA-A10", "a10-24g"}}
	require.Equal(t, "NVIDIA-A10", info.AcceleratorType())
	for _, c := range []struct {
		name    string
		pod     *corev1.Pod
		wantErr string
	}{
		{name: "gpuType of the same model", pod: testPod(nodeSelector(LabelGPUTypeCamel, "a10-24g"))},
		{name: "gpu-type in (A10, A100)", pod: testPod(func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: LabelGPUType, Operator: corev1.NodeSelectorOpIn, Values: []string{"A10", "A100"}}}}}}}}
		})},
		{name: "gpuType of another model", pod: testPod(nodeSelector(LabelGPUTypeCamel, "A100")),
			wantErr: `[P5] nodeSelector runwhere.ai/gpuType=A100 does not match pool "dev-pool", whose nodes are runwhere.ai/gpu-type=NVIDIA-A10: ask for runwhere.ai/gpuType=NVIDIA-A10 or use a pool of the gpu-type you need`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckPodAccelerator(c.pod, info, Accelerators{})
			if c.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, c.wantErr)
		})
	}
	assert.Empty(t, PoolInfo{GPUTypes: []string{"A10", "A100-80G"}}.AcceleratorType(), "members of two models pin none")
}
