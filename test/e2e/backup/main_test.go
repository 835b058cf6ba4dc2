// Package backup plays docs/backup.md on the local control plane with Kueue: Pools (one
// feeding a Kueue queue), a finished DriverRollout and a finished StressRun are saved
// with kubectl, litepool is uninstalled (its CRDs deleted, which takes the Kueue objects
// its Pools own with them), installed again, and the saved objects restored with
// `kubectl litepool restore`: the Pools serve (the webhook's rules apply to them), the
// controller makes their Kueue queues again, and the finished rollout and run stay
// finished.
package backup

import (
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

var kueue *framework.Kueue

func TestMain(m *testing.M) {
	framework.MainWith(m, "backup", "Kueue", func(c *framework.Cluster) (func(), error) {
		var err error
		kueue, err = framework.StartKueue(c)
		if err != nil {
			return nil, err
		}
		return kueue.Stop, nil
	})
}
