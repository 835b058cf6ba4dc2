package get

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// PoolTable is the table of `get pools`: gpuctl's columns, and with -o wide the pool's
// type, accelerator, healthy and faulty nodes and driver versions (and its MIG slices,
// DRA devices and scheduler queue where some pool has them).
func PoolTable(pools []v1alpha1.Pool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		kit.Column("Pool Name", "string", false),
		kit.Column("Status", "string", false),
		kit.Column("GPU Total", "integer", false),
		kit.Column("GPU Used", "integer", false),
		kit.Column("GPU Free", "integer", false),
		kit.Column("Node Count", "integer", false),
		kit.Column("Type", "string", true),
		kit.Column("Accelerator", "string", true),
		kit.Column("Resource", "string", true),
		kit.Column("Healthy", "integer", true),
		kit.Column("Faulty", "integer", true),
		kit.Column("Driver Versions", "string", true),
	}}
	withMIG := slices.ContainsFunc(pools, func(p v1alpha1.Pool) bool { return len(p.Status.MIGSlices) > 0 })
	if withMIG {
		t.ColumnDefinitions = append(t.ColumnDefinitions, kit.Column(migColumn, "string", true))
	}
	for i := range pools {
		p := &pools[i]
		s := p.Status
		cells := []any{p.Name, s.Phase, s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree, s.NodeCount,
			kit.PoolTypeCell(p), kit.AcceleratorCell(p), kit.None(string(s.AcceleratorResource)),
			s.HealthyNodes, s.FaultyNodes, kit.JoinOrNone(s.DriverVersions)}
		if withMIG {
			var cell []string
			for _, m := range s.MIGSlices {
				cell = append(cell, migCell(m.Resource, m.Used, m.Total))
			}
			cells = append(cells, kit.JoinOrNone(cell))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: p}})
	}
	withDRAPools(t, pools)
	withQueues(t, pools)
	withTopology(t, pools)
	return t
}

// topologyColumns head the -o wide columns of a pool's domains (spec.topology,
// docs/topology.md), shown only when some pool has them: the largest free block (the
// most accelerators free in one whole domain: the largest job that fits in one unit
// now) and the whole domains with nothing in use, of all domains.
var topologyColumns = []metav1.TableColumnDefinition{
	kit.Column("Largest Free Block", "string", true),
	kit.Column("Whole Free Domains", "string", true),
}

// withTopology adds the topology columns to the table of `get pools`.
func withTopology(t *metav1.Table, pools []v1alpha1.Pool) {
	if !slices.ContainsFunc(pools, func(p v1alpha1.Pool) bool { return p.Status.Topology != nil }) {
		return
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, topologyColumns...)
	for i := range pools {
		cells := []any{"<none>", "<none>"}
		if top := pools[i].Status.Topology; top != nil {
			cells = []any{fmt.Sprint(top.LargestFreeBlock), fmt.Sprintf("%d/%d", top.WholeFree, top.Domains)}
		}
		t.Rows[i].Cells = append(t.Rows[i].Cells, cells...)
	}
}

// migColumn heads the -o wide column of MIG slices, shown only when some row has any:
// slices are parts of GPUs, so they are never added to the GPU columns.
const migColumn = "MIG Used/Total"

// migCell writes one MIG profile as mig-1g.10gb=2/7 (used/total).
func migCell(rn corev1.ResourceName, used, total int64) string {
	return fmt.Sprintf("%s=%d/%d", strings.TrimPrefix(string(rn), "nvidia.com/"), used, total)
}

// nodeMIGCell is a node's MIG slices for tables.
func nodeMIGCell(ms []inventory.MIGSlices) string {
	var cell []string
	for _, m := range ms {
		cell = append(cell, migCell(m.Resource, m.Used, m.Total))
	}
	return kit.JoinOrNone(cell)
}
