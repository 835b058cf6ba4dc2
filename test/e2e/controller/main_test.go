// Package controller tests litepool-webhook's controllers (pkg/controller) against the
// local control plane with the sample fixture: Pool status and the per-pool gauges
// follow the cluster and equal what `kubectl litepool get pools` computes.
package controller

import (
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-controller") }
