package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// TestOperations: DriverRollouts and StressRuns written with plain kubectl get the checks
// the plugin makes before it creates one (U2, U5, U6, C1; T3, T4), from the operations webhook.
// Server dry runs: the API server runs admission, and nothing is stored for a
// controller to act on.
func TestOperations(t *testing.T) {
	c := framework.C
	crt := newCerts(t)
	proc, _ := startWebhook(t, crt)
	registerWebhooks(t, c.Kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, c.Kube, ns, 30*time.Second))

	rollout := func(annotations, spec string) string {
		return "apiVersion: runwhere.ai/v1alpha1\nkind: DriverRollout\nmetadata:\n  name: by-kubectl\n" + annotations +
			"spec:\n  installer: {image: registry.example/installer:1}\n" + spec
	}
	create := func(manifest string) framework.Result {
		return c.Kubectl(t, manifest, "create", "--dry-run=server", "-f", "-")
	}
	for _, tc := range []struct {
		name, manifest, want string
		ok                   bool
	}{
		{name: "a driver the matrix does not know is refused (C1)", manifest: rollout("", "  pool: train-a100\n  version: 999.1.1\n"),
			want: `admission webhook "operations.runwhere.ai" denied the request: [C1] version chain is`},
		{name: "runwhere.ai/force overrides C1, with a warning", ok: true,
			manifest: rollout("  annotations: {runwhere.ai/force: \"alice: vendor hotfix\"}\n", "  pool: train-a100\n  version: 999.1.1\n"),
			want:     `Warning: [C1] overridden by runwhere.ai/force="alice: vendor hotfix" (request by`},
		{name: "a version no label can hold (U2)", manifest: rollout("", "  pool: train-a100\n  version: \"535 beta\"\n"),
			want: `[U2] invalid spec.version "535 beta"`},
		{name: "a canary outside the pool (U5)", manifest: rollout("", "  pool: train-a100\n  canary: a100-node-4\n  version: 535.104.05\n"),
			want: `[U5] spec.canary "a100-node-4" is not a member of pool "train-a100": name one of a100-node-1, a100-node-2, a100-node-3`},
		{name: "a rollout by domain of a pool without a topology (U6)", manifest: rollout("", "  pool: train-a100\n  maxUnavailableDomains: 1\n  version: 535.104.05\n"),
			want: `admission webhook "operations.runwhere.ai" denied the request: [U6] spec.maxUnavailableDomains applies to a pool with a topology, and pool "train-a100" has none`},
		{name: "both paces at once (the CRD)", manifest: rollout("", "  pool: train-a100\n  maxUnavailable: 1\n  maxUnavailableDomains: 1\n  version: 535.104.05\n"),
			want: "set one of spec.maxUnavailable (node by node) or spec.maxUnavailableDomains (domain by domain)"},
		{name: "a published driver for the pool's model", ok: true, manifest: rollout("", "  pool: train-a100\n  version: 535.104.05\n"),
			want: "driverrollout.runwhere.ai/by-kubectl created (server dry run)"},
		{name: "a stress run on a node outside its pool (T3)",
			manifest: "apiVersion: runwhere.ai/v1alpha1\nkind: StressRun\nmetadata:\n  name: by-kubectl\nspec:\n  pool: train-a100\n  nodes: [a100-node-1, cpu-node-1]\n  tests: [npu]\n  image: registry.example/stress:1\n",
			want:     `[T3] spec.nodes cpu-node-1 are not members of pool "train-a100"`},
		{name: "a stress run by domain of a pool without a topology (T4)",
			manifest: "apiVersion: runwhere.ai/v1alpha1\nkind: StressRun\nmetadata:\n  name: by-kubectl\nspec:\n  pool: train-a100\n  domains: true\n  tests: [npu]\n  image: registry.example/stress:1\n",
			want:     `admission webhook "operations.runwhere.ai" denied the request: [T4] spec.domains tests a pool by unit domain, and pool "train-a100" has no topology (no spec.topology)`},
		{name: "a stress run by domain naming nodes (the CRD)",
			manifest: "apiVersion: runwhere.ai/v1alpha1\nkind: StressRun\nmetadata:\n  name: by-kubectl\nspec:\n  pool: train-a100\n  domains: true\n  nodes: [a100-node-1]\n  tests: [npu]\n  image: registry.example/stress:1\n",
			want:     "set one of spec.nodes (some members) or spec.domains (whole domains)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := create(tc.manifest)
			out := res.Stdout + res.Stderr
			assert.Equal(t, tc.ok, res.ExitCode == 0, out)
			assert.True(t, strings.Contains(out, tc.want), "want %q in:\n%s", tc.want, out)
		})
	}
}
