// Package upgrade tests driver upgrades, compatibility checks, stress tests and HCCL
// settings against the local control plane. Each test makes its own pool of fresh
// nodes (kwok plays their kubelet) rather than touching the shared fixture. The
// installer Jobs complete as kwok completes Job pods (the job controller then marks the
// Job Complete); a fake agent plays the driver: it sets the node's driver-version label,
// as the device plugin would after a real install (and marks Succeeded, through the
// status subresource, any installer pod kwok has not completed).
package upgrade

import (
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-upgrade") }
