// Package dra tests the DRA figures (docs/dra.md) against the local control plane, whose
// scheduler allocates ResourceClaims: ResourceSlices published for kwok nodes as a
// driver would (whole GPUs, a partitionable GPU, a tainted GPU), DeviceClasses, pods
// with ResourceClaimTemplates and a pod asking for nvidia.com/gpu through the
// extended-resource mapping. `get pools`, `get nodes`, Pool status and the metrics must
// show the exact totals, allocated, free and unhealthy devices of the pool.
package dra

import (
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-dra") }
