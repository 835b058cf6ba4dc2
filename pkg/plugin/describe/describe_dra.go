package describe

import (
	"context"
	"fmt"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// nodeDRA reads the DRA devices of every node (docs/dra.md) for describe node. A cluster
// without resource.k8s.io/v1 has none.
func nodeDRA(ctx context.Context, c *kit.Clients) (inventory.DRANodes, error) {
	nodes, _, err := inventory.CollectDRA(ctx, c.Kube)
	return nodes, err
}

// describeDRA writes DRA devices, one line a driver/class/model, apart from the
// extended-resource accelerators above them.
func describeDRA(w prefixWriter, rows []inventory.DRADevices) {
	if len(rows) == 0 {
		return
	}
	sum := inventory.DRASum(rows)
	w.Write(level0, "DRA Devices:\t%d total, %d allocated, %d free, %d unhealthy\n", sum.Total, sum.Allocated, sum.Free, sum.Unhealthy)
	for _, r := range rows {
		name := r.Driver + " " + kit.None(r.Class)
		if r.Model != "" {
			name += " " + r.Model
		}
		line := fmt.Sprintf("%d total, %d allocated, %d free, %d unhealthy", r.Total, r.Allocated, r.Free, r.Unhealthy)
		if r.Partitionable > 0 {
			line += fmt.Sprintf(" (%d partitionable, %d partitions allocated)", r.Partitionable, r.PartitionsAllocated)
		}
		w.Write(level1, "%s:\t%s\n", name, line)
	}
}

// describePoolDRA is describeDRA for a pool's status.dra.
func describePoolDRA(w prefixWriter, d *v1alpha1.DRAStatus) {
	if d == nil {
		return
	}
	rows := make([]inventory.DRADevices, 0, len(d.Devices))
	for _, r := range d.Devices {
		rows = append(rows, inventory.DRADevices{Driver: r.Driver, Class: r.DeviceClass, Model: r.Model, Total: r.Total,
			Allocated: r.Allocated, Free: r.Free, Unhealthy: r.Unhealthy, Partitionable: r.Partitionable, PartitionsAllocated: r.PartitionsAllocated})
	}
	describeDRA(w, rows)
}
