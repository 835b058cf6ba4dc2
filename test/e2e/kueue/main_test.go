// Package kueue tests pools feeding Kueue (issue 31, docs/queueing.md) against the local
// control plane: Kueue's own controller-manager (hack/build-kueue.sh) with its CRDs and
// webhooks, litepool-webhook with its controllers, real batch/v1 Jobs that Kueue admits
// and the real scheduler places on kwok nodes.
package kueue

import (
	"fmt"
	"os"
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// K is the package's Kueue.
var K *framework.Kueue

func TestMain(m *testing.M) {
	const name = "e2e-kueue"
	c, err := framework.Start(name, true)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: the local control plane did not start: %v\n", err)
		os.Exit(1)
	}
	framework.C = c
	if K, err = framework.StartKueue(c, framework.KueueDeviceClassMapping(string(draResource), draClass)); err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: Kueue did not start: %v\n", err)
		_ = c.Stop()
		os.Exit(1)
	}
	w, err := framework.StartWebhook(c, "--controllers=true", "--health-images=registry.example.com/")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: the webhook did not start: %v\n", err)
		K.Stop()
		_ = c.Stop()
		os.Exit(1)
	}
	framework.W = w
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: kueue log: %s\ne2e: webhook log: %s\n", K.Log, w.Log)
	}
	w.Stop()
	K.Stop()
	if os.Getenv("LITEPOOL_E2E_KEEP") == "" {
		_ = c.Stop()
	} else {
		fmt.Fprintf(os.Stderr, "e2e: cluster %s kept; kubeconfig %s\n", name, c.Kubeconfig)
	}
	os.Exit(code)
}
