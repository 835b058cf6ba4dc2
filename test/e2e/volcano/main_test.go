// Package volcano tests pools feeding Volcano (issue 42, docs/queueing.md) against the
// local control plane with Volcano's CRDs as controller-gen makes them from
// volcano.sh/apis (hack/build-volcano-crds.sh): the API server validates every Queue and
// HyperNode litepool writes, and litepool-webhook runs its controllers. No Volcano
// scheduler runs here (the module proxy does not serve it).
package volcano

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) {
	const name = "e2e-volcano"
	c, err := framework.Start(name, true)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: the local control plane did not start: %v\n", err)
		os.Exit(1)
	}
	framework.C = c
	if err := framework.InstallVolcanoCRDs(context.Background(), c); err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: Volcano's CRDs: %v\n", err)
		_ = c.Stop()
		os.Exit(1)
	}
	w, err := framework.StartWebhook(c, "--controllers=true", "--health-images=registry.example.com/")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: the webhook did not start: %v\n", err)
		_ = c.Stop()
		os.Exit(1)
	}
	framework.W = w
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: webhook log: %s\n", w.Log)
	}
	w.Stop()
	if os.Getenv("LITEPOOL_E2E_KEEP") == "" {
		_ = c.Stop()
	} else {
		fmt.Fprintf(os.Stderr, "e2e: cluster %s kept; kubeconfig %s\n", name, c.Kubeconfig)
	}
	os.Exit(code)
}
