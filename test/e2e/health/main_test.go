// Package health tests the node health loop (pkg/health, issue 21) against the local
// control plane: litepool-webhook runs with --controllers, kwok plays the nodes, the
// tests play the device plugin (allocatable), Node Problem Detector (conditions) and
// the stress-test pods' outcomes.
package health

import (
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-health") }
