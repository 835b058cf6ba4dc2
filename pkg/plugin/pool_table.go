package plugin

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
)

// PoolTable is the table of `get pools`: gpuctl's columns, and with -o wide the pool's
// type, accelerator, healthy and faulty nodes and driver versions.
func PoolTable(pools []v1alpha1.Pool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Pool Name", "string", false),
		column("Status", "string", false),
		column("GPU Total", "integer", false),
		column("GPU Used", "integer", false),
		column("GPU Free", "integer", false),
		column("Node Count", "integer", false),
		column("Type", "string", true),
		column("Accelerator", "string", true),
		column("Resource", "string", true),
		column("Healthy", "integer", true),
		column("Faulty", "integer", true),
		column("Driver Versions", "string", true),
	}}
	withMIG := slices.ContainsFunc(pools, func(p v1alpha1.Pool) bool { return len(p.Status.MIGSlices) > 0 })
	if withMIG {
		t.ColumnDefinitions = append(t.ColumnDefinitions, column(migColumn, "string", true))
	}
	for i := range pools {
		p := &pools[i]
		s := p.Status
		cells := []any{p.Name, s.Phase, s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree, s.NodeCount,
			poolTypeCell(p), acceleratorCell(p), none(string(s.AcceleratorResource)),
			s.HealthyNodes, s.FaultyNodes, joinOrNone(s.DriverVersions)}
		if withMIG {
			var cell []string
			for _, m := range s.MIGSlices {
				cell = append(cell, migCell(m.Resource, m.Used, m.Total))
			}
			cells = append(cells, joinOrNone(cell))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: p}})
	}
	return t
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
	return joinOrNone(cell)
}

func poolTypeCell(p *v1alpha1.Pool) string {
	if !HasObject(p) {
		return "<no pool object>"
	}
	if p.Spec.Type == "" {
		return string(v1alpha1.PoolTypeTraining)
	}
	return string(p.Spec.Type)
}

func acceleratorCell(p *v1alpha1.Pool) string {
	if p.Spec.Accelerator.Type != "" {
		return p.Spec.Accelerator.Type
	}
	return joinOrNone(p.Status.GPUTypes)
}
