package plugin

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
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
	for i := range pools {
		p := &pools[i]
		s := p.Status
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{p.Name, s.Phase, s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree, s.NodeCount,
				poolTypeCell(p), acceleratorCell(p), none(string(s.AcceleratorResource)),
				s.HealthyNodes, s.FaultyNodes, joinOrNone(s.DriverVersions)},
			Object: runtime.RawExtension{Object: p},
		})
	}
	return t
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
