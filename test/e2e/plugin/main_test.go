// Package plugin tests every pool, node-pool, node and scaling command of kubectl
// litepool against the local control plane, through kubectl's plugin discovery:
// success paths, and failure paths with the exact error a user sees and the cluster
// left unchanged.
//
// Tests run one after another on one cluster loaded with the sample AI cluster
// (hack/fixtures). Every test that changes the cluster puts it back (restore) so the
// next one starts from the fixture.
//
// The litepool webhook runs for the whole package (framework.MainWithWebhook), as in a
// cluster where it is installed: every change the plugin makes goes through admission.
package plugin

import (
	"testing"

	fw "github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { fw.MainWithWebhook(m, "e2e-plugin") }
