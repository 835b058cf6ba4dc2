package main

import (
	"flag"
	"fmt"
)

// Topology labels as their real writers set them (pkg/policy TopologyPresets): every
// domainSize consecutive nodes make one unit domain (5,000 nodes: 625). Ascend nodes get
// MindCluster's super pod and rack IDs (numbers; two racks of half the super pod each),
// NVIDIA nodes GPU feature discovery's NVLink clique, <ClusterUUID>.<CliqueID>. The Pool
// objects take the preset of their accelerator, so the units are the super pod and the
// clique.
var (
	domainSize = flag.Int("domain-size", 8, "nodes per topology domain, labelled with the Ascend or NVIDIA preset's keys and values (5,000 nodes: 625 domains); every Pool object gets spec.topology with its preset; 0 for none")
	expect     = flag.Bool("expect", false, "print what get pools and get domains must show of the cluster these flags build (rows of each), create nothing")
)

const (
	labelSuperPod = "huawei.com/topotree.superpodid"
	labelRack     = "huawei.com/topotree.rackid"
	labelClique   = "nvidia.com/gpu.clique"
)

// domainOf is node i's unit domain index.
func domainOf(i int) int { return i / *domainSize }

// topologyLabels adds node i's topology labels, as the preset of its accelerator has them.
func topologyLabels(labels map[string]string, i int, ascend bool) {
	if *domainSize <= 0 {
		return
	}
	d := domainOf(i)
	if ascend {
		labels[labelSuperPod] = fmt.Sprint(d)
		labels[labelRack] = fmt.Sprint(d*2 + (i%*domainSize)*2 / *domainSize)
		return
	}
	// One NVL72-like rack a domain: its own Fabric Manager cluster UUID, one clique.
	labels[labelClique] = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x.%d", 0x5ec0da7a, d>>16&0xffff, d>>4&0xfff, d&0xfff, d, 32766)
}

// topologyPreset is the spec.topology of pool p's Pool object.
func topologyPreset(p int) map[string]any {
	if npu(p, 0) {
		return map[string]any{"preset": "Ascend"}
	}
	return map[string]any{"preset": "NVIDIA"}
}

// printExpected prints the rows get pools and get domains show of this cluster: pools
// (with Pool objects, even memberless; label-only pools with members; the default pool)
// and the domains of the pools with a topology (a domain that straddles two pools is a
// row in each).
func printExpected() {
	withObject := *numPools * 3 / 4
	pools, domains := map[int]bool{}, map[[2]int]bool{}
	for i := 0; i < *numNodes; i++ {
		p := poolOf(i)
		pools[p] = true
		if p >= 0 && p < withObject && *domainSize > 0 {
			domains[[2]int{p, domainOf(i)}] = true
		}
	}
	rows := len(pools)
	for p := 0; p < withObject; p++ {
		if !pools[p] {
			rows++
		}
	}
	if !pools[-1] {
		rows++ // the default pool always shows
	}
	fmt.Printf("pools %d\ndomains %d\n", rows, len(domains))
}
