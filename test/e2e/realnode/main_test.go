// Package realnode tests litepool as operators install it: `kubectl apply -k` of
// deploy/webhook (through an overlay that points it at the image make image built),
// real pods on a real kubelet (hack/realnode.sh: containerd and runc) that the API
// server calls for admission, leader election between pods that get killed, and driver
// installers and stress tests that are real containers with exit codes. The last step
// stops the node and checks that the host is as it was before.
package realnode

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	cluster   = "e2e-realnode"
	node      = framework.RealNode
	system    = "litepool-system"
	workloads = "ai-team"
	// Images make image builds (hack/image/build), imported on the real node.
	webhookImage     = "litepool.local/litepool-webhook:e2e"
	installerOK      = "litepool.local/driver-installer:ok"
	installerFailing = "litepool.local/driver-installer:fail"
	stressFailing    = "litepool.local/stress:fail"
	pauseImage       = "litepool.local/pause:e2e"
)

var (
	ctx = context.Background()
	// hostBefore is the host as it was before the cluster and its real node started.
	hostBefore hostState
)

func TestMain(m *testing.M) {
	// First: the packages the node needs stay installed after teardown, so "before" is
	// read once they are there (a fresh machine has none of them; iptables-save is one).
	if err := framework.InstallRealNodePackages(); err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: %v\n", err)
		os.Exit(1)
	}
	var err error
	if hostBefore, err = snapshotHost(); err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: reading the host's state: %v\n", err)
		os.Exit(1)
	}
	framework.MainRealNode(m, cluster)
}

// TestRealNode runs the steps in order: each needs what the ones before it installed,
// and the last takes the node down.
func TestRealNode(t *testing.T) {
	overlay := writeOverlay(t)
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"kubectl apply -k installs litepool as real pods", func(t *testing.T) { testInstall(t, overlay) }},
		{"admission through the Service", testAdmission},
		{"admission survives a deleted webhook pod", testWebhookPodDeleted},
		{"a drain honours the grace period and the PDB", testDrain},
		{"the leader pod is killed mid-rollout", testLeaderKilledMidRollout},
		{"node agents on the exclusive real node come only from trusted namespaces", testNodeAgents},
		{"kubectl delete -k leaves no webhook configuration", func(t *testing.T) { testUninstall(t, overlay) }},
		// After litepool is gone: the installers' drains would evict it from the node.
		{"driver installers and stress tests run as real containers", testRealContainers},
		{"a driver rollout by domain: the real node one member beside kwok nodes", testRolloutByDomain},
		{"the health loop: remediation Jobs and re-checks are real containers", testHealthLoop},
	}
	for _, s := range steps {
		t.Run(s.name, s.run)
	}
	// Always last, whatever failed before: the host must be given back.
	t.Run("teardown restores the host", testTeardown)
}
