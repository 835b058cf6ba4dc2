package get

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// draColumns head the -o wide columns of DRA devices (docs/dra.md), shown only when some
// row has any. They are apart from the GPU columns, which count extended resources: a
// device is counted in one or the other, never both.
var draColumns = []metav1.TableColumnDefinition{
	kit.Column("DRA Total", "integer", true),
	kit.Column("DRA Allocated", "integer", true),
	kit.Column("DRA Free", "integer", true),
	kit.Column("DRA Unhealthy", "integer", true),
	kit.Column("DRA Devices", "string", true),
}

// withDRAPools adds the DRA columns to the table of `get pools`, whose rows are pools.
func withDRAPools(t *metav1.Table, pools []v1alpha1.Pool) {
	if !slices.ContainsFunc(pools, func(p v1alpha1.Pool) bool { return p.Status.DRA != nil }) {
		return
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, draColumns...)
	for i := range pools {
		var rows []inventory.DRADevices
		if d := pools[i].Status.DRA; d != nil {
			for _, r := range d.Devices {
				rows = append(rows, inventory.DRADevices{Driver: r.Driver, Class: r.DeviceClass, Model: r.Model,
					Total: r.Total, Allocated: r.Allocated, Free: r.Free, Unhealthy: r.Unhealthy})
			}
		}
		t.Rows[i].Cells = append(t.Rows[i].Cells, draCells(rows)...)
	}
}

// withDRANodes adds the DRA columns to the table of `get nodes`, whose rows are nodes.
func withDRANodes(t *metav1.Table, nodes []inventory.Node) {
	if !slices.ContainsFunc(nodes, func(n inventory.Node) bool { return len(n.DRA) > 0 }) {
		return
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, draColumns...)
	for i := range nodes {
		t.Rows[i].Cells = append(t.Rows[i].Cells, draCells(nodes[i].DRA)...)
	}
}

func draCells(rows []inventory.DRADevices) []any {
	sum := inventory.DRASum(rows)
	var devices []string
	for _, r := range rows {
		devices = append(devices, DRADevicesCell(r))
	}
	return []any{sum.Total, sum.Allocated, sum.Free, sum.Unhealthy, kit.JoinOrNone(devices)}
}

// DRADevicesCell writes one row of devices as CLASS[/MODEL]=ALLOCATED/TOTAL (the driver
// when no class selects them).
func DRADevicesCell(r inventory.DRADevices) string {
	name := r.Class
	if name == "" {
		name = r.Driver
	}
	if r.Model != "" {
		name += "/" + r.Model
	}
	return fmt.Sprintf("%s=%d/%d", name, r.Allocated, r.Total)
}
