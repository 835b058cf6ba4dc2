package inventory

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// The scanner fills only the fields policy reads today. This test is the tripwire for
// tomorrow: every field of every Pod and Node is filled at random (randfill walks the
// whole type), and the inventory built from the full objects must equal the one built
// from what the scanner kept. Should policy start reading a field the scanner drops
// (a priority, a toleration, a condition, an annotation), the random values of that
// field make the two inventories differ and this test fails, naming the node.

// filler fills whole objects at random, steering the values policy interprets (resource
// names, phases, conditions, owner kinds, litepool's keys) towards ones it acts on, so
// that every branch is taken.
func filler(seed int64) *randfill.Filler {
	r := rand.New(rand.NewSource(seed))
	pick := func(c randfill.Continue, options ...string) string { return options[c.Intn(len(options))] }
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(int64(c.Intn(9)), resource.DecimalSI)
		},
		func(l *corev1.ResourceList, c randfill.Continue) {
			*l = corev1.ResourceList{}
			for _, name := range []corev1.ResourceName{"cpu", "memory", "nvidia.com/gpu", "huawei.com/Ascend910", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "example.com/fpga"} {
				if c.Intn(3) == 0 {
					(*l)[name] = *resource.NewQuantity(int64(c.Intn(9)), resource.DecimalSI)
				}
			}
		},
		func(m *map[string]string, c randfill.Continue) {
			*m = map[string]string{c.String(8): c.String(8)}
			keys := map[string][]string{
				"runwhere.ai/pool":                    {"pool-a", "pool-b", "default", ""},
				"runwhere.ai/node-pool":               {"np-1", "np-2"},
				"runwhere.ai/gpu-type":                {"A100-80G", "Snt9B"},
				"runwhere.ai/health":                  {"degraded", "healthy"},
				"runwhere.ai/draining":                {"true"},
				"runwhere.ai/upgrade-state":           {"install", "done", "failed", "cordon"},
				"runwhere.ai/driver-version":          {"24.1.rc2"},
				"nvidia.com/gpu.product":              {"NVIDIA-A100-SXM4-80GB"},
				"nvidia.com/cuda.driver-version.full": {"535.104.05"},
				"huawei.com/driver.version":           {"24.1.rc3"},
				"huawei.com/topotree.superpodid":      {"sp1", "sp2"},
				"huawei.com/topotree.rackid":          {"r1", "r2"},
				"accelerator":                         {"huawei-Ascend910", "huawei-Ascend310"},
				corev1.MirrorPodAnnotationKey:         {"hash"},
			}
			// In a fixed order: ranging over the map would draw the random numbers in
			// Go's random map order, and a seed would not give the same objects twice.
			for _, k := range slices.Sorted(maps.Keys(keys)) {
				if c.Intn(3) == 0 {
					(*m)[k] = pick(c, keys[k]...)
				}
			}
		},
		func(p *corev1.PodPhase, c randfill.Continue) {
			*p = corev1.PodPhase(pick(c, "Running", "Pending", "Succeeded", "Failed", "Unknown"))
		},
		func(t *corev1.NodeConditionType, c randfill.Continue) {
			*t = corev1.NodeConditionType(pick(c, "Ready", "Ready", "MemoryPressure", "DiskPressure"))
		},
		func(s *corev1.ConditionStatus, c randfill.Continue) {
			*s = corev1.ConditionStatus(pick(c, "True", "False", "Unknown"))
		},
		func(e *corev1.TaintEffect, c randfill.Continue) {
			*e = corev1.TaintEffect(pick(c, "NoSchedule", "NoExecute", "PreferNoSchedule"))
		},
		func(t *corev1.Taint, c randfill.Continue) {
			c.FillNoCustom(t)
			t.Key = pick(c, t.Key, "runwhere.ai/pool", "nvidia.com/gpu", "runwhere.ai/quarantine")
			t.Value = pick(c, t.Value, "pool-a")
		},
		func(p *corev1.ContainerRestartPolicy, c randfill.Continue) {
			*p = corev1.ContainerRestartPolicy(pick(c, "Always", "Never", "OnFailure"))
		},
		func(o *metav1.OwnerReference, c randfill.Continue) {
			c.FillNoCustom(o)
			o.Kind = pick(c, "DaemonSet", "Job", "ReplicaSet", "StatefulSet", "Node")
		},
		func(t *metav1.Time, c randfill.Continue) { // whole seconds survive protobuf
			*t = metav1.Unix(int64(r.Intn(2_000_000_000)), 0)
		},
		func(t **metav1.Time, c randfill.Continue) {
			if c.Intn(3) == 0 {
				*t = nil
				return
			}
			v := metav1.Unix(int64(r.Intn(2_000_000_000)), 0)
			*t = &v
		},
		func(t *metav1.MicroTime, c randfill.Continue) { *t = metav1.NewMicroTime(metav1.Unix(0, 0).Time) },
	)
}

func TestScannerKeepsEveryFieldPolicyReads(t *testing.T) {
	var used int64
	states, domainStates := map[string]bool{}, map[string]bool{}
	domains, mixed := 0, 0
	for seed := int64(1); seed <= 20; seed++ {
		f := filler(seed)
		pods := &corev1.PodList{}
		for i := 0; i < 100; i++ {
			var p corev1.Pod
			f.Fill(&p)
			p.Spec.NodeName = fmt.Sprintf("n%d", i%10) // pods must land on the listed nodes
			pods.Items = append(pods.Items, p)
		}
		nodes := &corev1.NodeList{}
		for i := 0; i < 10; i++ {
			var n corev1.Node
			f.Fill(&n)
			n.Name = fmt.Sprintf("n%d", i)
			if i < 7 { // most nodes in a domain of a pool with a topology; the rest as drawn
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels[policy.LabelPool] = []string{"pool-a", "pool-b"}[i%2]
				n.Labels["huawei.com/topotree.superpodid"] = fmt.Sprintf("sp%d", i%3)
				n.Labels["huawei.com/topotree.rackid"] = "r1"
			}
			nodes.Items = append(nodes.Items, n)
		}

		// Both pools have a topology: the domain views (NodeOut's taints, the
		// per-node count's capacity, the levels' labels) must agree too.
		topologies := map[string]PoolTopology{
			"pool-a": {Topology: policy.Topology{Levels: []string{"huawei.com/topotree.superpodid", "huawei.com/topotree.rackid"}, Unit: "huawei.com/topotree.rackid", MinNodesPerDomain: 1}},
			"pool-b": {Topology: policy.Topology{Levels: []string{"huawei.com/topotree.superpodid"}, Unit: "huawei.com/topotree.superpodid", MinNodesPerDomain: 1}, Resource: "nvidia.com/gpu"},
		}
		full := NewBuilder()
		full.Topologies = topologies
		for i := range pods.Items {
			full.AddPod(&pods.Items[i])
		}
		for i := range nodes.Items {
			full.AddNode(&nodes.Items[i])
		}
		scanned := NewBuilder()
		scanned.Topologies = topologies
		var pod corev1.Pod
		_, err := listItems(encode(t, pods), func(b []byte) error {
			if err := scanPod(b, &pod, map[string]string{}, policy.Accelerators{}); err != nil {
				return err
			}
			scanned.AddPod(&pod)
			return nil
		})
		require.NoError(t, err, "seed %d", seed)
		var node corev1.Node
		_, err = listItems(encode(t, nodes), func(b []byte) error {
			if err := scanNode(b, &node, policy.Accelerators{}); err != nil {
				return err
			}
			scanned.AddNode(&node)
			return nil
		})
		require.NoError(t, err, "seed %d", seed)

		want, got := full.Build(), scanned.Build()
		for i := range want.Nodes {
			assert.Equal(t, want.Nodes[i], got.Nodes[i], "seed %d: node %s reads differently after the scanner: policy reads a field the scanner does not fill (pkg/inventory/scan.go)", seed, want.Nodes[i].Name)
		}
		assert.Equal(t, want.Pools, got.Pools, "seed %d", seed)
		for _, n := range want.Nodes {
			used += n.Used
			states[string(n.State)] = true
		}
		for _, p := range want.Pools {
			if p.Domains != nil {
				domains += len(p.Domains.Domains)
				for _, d := range p.Domains.Domains {
					domainStates[d.State] = true
					if d.Mixed {
						mixed++
					}
				}
			}
		}
	}
	// The random sample takes the branches that matter: accelerators in use, and nodes
	// in every state policy tells apart.
	assert.Greater(t, used, int64(100))
	assert.Len(t, states, 6, "%v", states)
	assert.Greater(t, domains, 100)
	assert.Len(t, domainStates, 3, "%v", domainStates)
	assert.Positive(t, mixed)
}
