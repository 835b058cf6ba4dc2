package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/runwhere-ai/litepool/pkg/inventory"
)

// draDevices is the per-pool DRA figures of Pool status.dra (docs/dra.md), apart from
// the accelerator gauges (extended resources): a device counts in one or the other.
var draDevices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "litepool_pool_dra_devices",
	Help: "DRA devices of a pool's Ready nodes (ResourceSlices; a partitioned device counts once), by pool, driver, device class, model and state (total, allocated, free, unhealthy).",
}, []string{"pool", "driver", "device_class", "model", "state"})

var draStates = []string{"total", "allocated", "free", "unhealthy"}

// recordDRA sets the DRA gauges of every pool and deletes the series of rows that are
// gone. seen is the label sets set last time; it returns this time's.
func recordDRA(inv *inventory.Inventory, seen map[[4]string]bool) map[[4]string]bool {
	now := map[[4]string]bool{}
	for name, sum := range inv.Pools {
		for _, r := range sum.DRA {
			key := [4]string{name, r.Driver, r.Class, r.Model}
			now[key] = true
			for i, v := range []int64{r.Total, r.Allocated, r.Free, r.Unhealthy} {
				draDevices.WithLabelValues(name, r.Driver, r.Class, r.Model, draStates[i]).Set(float64(v))
			}
		}
	}
	for key := range seen {
		if !now[key] {
			for _, s := range draStates {
				draDevices.DeleteLabelValues(key[0], key[1], key[2], key[3], s)
			}
		}
	}
	return now
}
