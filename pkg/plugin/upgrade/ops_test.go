package upgrade

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// inCluster is a pool rollout handed to the controller.
var inCluster = policy.UpgradeRun{ID: "r1", Pool: "p", Target: target, MaxUnavailable: "1", InstallerImage: "inst:1", Namespace: "kube-system", InCluster: true}

// rolloutNodes: p-1 waiting for its wave, p-2 draining, p-3 failed.
func rolloutNodes() (*corev1.Node, *corev1.Node, *corev1.Node) {
	return marked(poolNode("p-1", "p"), inCluster, policy.UpgradeRequired, "waiting for its wave"),
		marked(poolNode("p-2", "p"), inCluster, policy.UpgradeDrain, "draining"),
		marked(poolNode("p-3", "p"), inCluster, policy.UpgradeFailed, "installer failed")
}

func TestUpgradeAbort(t *testing.T) {
	const said = "in progress, finished by the running rollout or `kubectl litepool upgrade resume`: p-2 (drain)\n" +
		"failed, left cordoned for inspection: p-3\n"
	for _, tc := range []struct {
		name        string
		args        []string
		out, errOut string
		removed     bool
		events      []string
	}{
		{"unmarks the nodes that have not started", nil, "aborted: 1 node(s) left the rollout: p-1\n" + said, "", true,
			[]string{"DriverUpgradeAborted: driver upgrade to 24.1.0.3 aborted before it started on this node"}},
		{"client dry run", []string{"--dry-run=client"}, "aborted (dry run): 1 node(s) left the rollout: p-1\n" + said, "", false, nil},
		{"server dry run", []string{"--dry-run=server"}, "aborted (server dry run): 1 node(s) left the rollout: p-1\n" + said, "", false, nil},
		{"-o jsonpath under a dry run: the nodes as they would be", []string{"--dry-run=client", "-o", "jsonpath={.metadata.name}:{.metadata.annotations}"},
			"p-1:", "aborted (dry run): 1 node(s) left the rollout: p-1\n" + said, false, nil},
		{"-o name: the nodes that left on stdout", []string{"-o", "name"}, "node/p-1\n", "aborted: 1 node(s) left the rollout: p-1\n" + said, true,
			[]string{"DriverUpgradeAborted: driver upgrade to 24.1.0.3 aborted before it started on this node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n1, n2, n3 := rolloutNodes()
			f := kittest.NewFactory(t, n1, n2, n3)
			r := upgradeCmd(f, "", append([]string{"abort", "--pool", "p"}, tc.args...)...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Equal(t, tc.errOut, r.ErrOut)
			if tc.removed {
				assert.Empty(t, f.Node(t, "p-1").Annotations)
			} else {
				assert.Equal(t, n1.Annotations, f.Node(t, "p-1").Annotations)
			}
			assert.Equal(t, n2.Annotations, f.Node(t, "p-2").Annotations, "a node in flight is never left half-done")
			assert.Equal(t, n3.Annotations, f.Node(t, "p-3").Annotations)
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

func TestUpgradeAbortNothingToAbort(t *testing.T) {
	f := kittest.NewFactory(t, poolNode("p-1", "p"))
	r := upgradeCmd(f, "", "abort", "--pool", "p")
	require.NoError(t, r.Err)
	assert.Equal(t, "no unfinished driver upgrade in pool p\n", r.Out)
	r = upgradeCmd(f, "", "abort")
	require.EqualError(t, r.Err, "give --pool POOL or --node NODE")
	r = upgradeCmd(f, "", "abort", "p")
	require.EqualError(t, r.Err, "upgrade abort takes no arguments: use --pool or --node")
	r = upgradeCmd(f, "", "resume", "p")
	require.EqualError(t, r.Err, "upgrade resume takes no arguments: use --pool or --node")
}

// A failed node stops the rollout until --retry-failed; then it is re-marked and the
// controller, which drives this rollout, takes it on.
func TestUpgradeResume(t *testing.T) {
	n1, n2, n3 := rolloutNodes()
	f := kittest.NewFactory(t, n1, n2, n3)
	r := upgradeCmd(f, "", "resume", "--pool", "p")
	require.EqualError(t, r.Err, "[U4] rollout r1 stopped on failed node(s) p-3 (installer failed): fix them, then resume with --retry-failed")
	assert.Empty(t, r.Out)
	assert.Equal(t, string(policy.UpgradeFailed), state(t, f, "p-3"))

	r = upgradeCmd(f, "", "resume", "--pool", "p", "--retry-failed", "--dry-run=client")
	require.NoError(t, r.Err)
	assert.Equal(t, "would retry node p-3 (failed: installer failed)\n"+
		"would resume rollout r1 (pool p → 24.1.0.3), max unavailable 1:\n"+
		"  wave 1: p-2 (from drain), p-3\n"+ // p-3 is cordoned already: it takes no more budget
		"  wave 2: p-1\n"+
		"(dry run: nothing changed)\n", r.Out)
	assert.Equal(t, string(policy.UpgradeFailed), state(t, f, "p-3"), "a dry run changes nothing")

	r = upgradeCmd(f, "", "resume", "--pool", "p", "--retry-failed")
	require.NoError(t, r.Err)
	assert.Equal(t, "node/p-3: failed → upgrade-required (retry)\n"+
		"rollout r1 (pool p → 24.1.0.3): 3 node(s) unfinished; the controller in litepool-webhook drives it: follow it with `kubectl litepool upgrade status --pool p -w`\n", r.Out)
	assert.Empty(t, r.ErrOut)
	assert.Equal(t, string(policy.UpgradeRequired), state(t, f, "p-3"))
	assert.Equal(t, string(policy.UpgradeDrain), state(t, f, "p-2"))
}

func TestUpgradeResumeOutputName(t *testing.T) {
	n1, n2, n3 := rolloutNodes()
	f := kittest.NewFactory(t, n1, n2, n3)
	r := upgradeCmd(f, "", "resume", "--pool", "p", "--retry-failed", "-o", "name")
	require.NoError(t, r.Err)
	assert.Equal(t, "node/p-3\n", r.Out)
	assert.Equal(t, "node/p-3: failed → upgrade-required (retry)\n"+
		"rollout r1 (pool p → 24.1.0.3): 3 node(s) unfinished; the controller in litepool-webhook drives it: follow it with `kubectl litepool upgrade status --pool p -w`\n", r.ErrOut)
}

func TestUpgradeResumeRefusals(t *testing.T) {
	n1, n2, n3 := rolloutNodes()
	f := kittest.NewFactory(t, n1, n2, n3)
	r := upgradeCmd(f, "", "resume", "--pool", "p", "--max-unavailable", "2")
	require.EqualError(t, r.Err, "[U3] rollout r1 is driven by the controller in litepool-webhook with the budget it started with: abort it and start it again with --max-unavailable")
	r = upgradeCmd(f, "", "resume", "--node", "p-1")
	require.EqualError(t, r.Err, "node p-1 belongs to pool p's rollout r1: resume it with --pool p, so that max-unavailable holds")
	assert.Equal(t, n1.Annotations, f.Node(t, "p-1").Annotations)

	f = kittest.NewFactory(t, poolNode("p-1", "p"))
	r = upgradeCmd(f, "", "resume", "--pool", "p")
	require.NoError(t, r.Err)
	assert.Equal(t, "nothing to resume in pool p: no unfinished driver upgrade\n", r.Out)
}

// upgrade status is data: -o json as before, -o jsonpath now.
func TestUpgradeStatus(t *testing.T) {
	n1, n2, n3 := rolloutNodes()
	f := kittest.NewFactory(t, n1, n2, n3)
	r := upgradeCmd(f, "", "status", "--pool", "p", "-o", "jsonpath={range .nodes[*]}{.node}={.state} {end}{.rollouts[0].phase}")
	require.NoError(t, r.Err)
	assert.Equal(t, "p-1=upgrade-required p-2=drain p-3=failed stopped on failure", r.Out)
	r = upgradeCmd(f, "", "status", "--pool", "p")
	require.NoError(t, r.Err)
	assert.Equal(t, `NODE   POOL   STATE              TARGET     DRIVER   CORDONED   MESSAGE
p-1    p      upgrade-required   24.1.0.3   23.0.6   false      waiting for its wave
p-2    p      drain              24.1.0.3   23.0.6   true       draining
p-3    p      failed             24.1.0.3   23.0.6   true       installer failed
rollout r1 (pool p → 24.1.0.3): stopped on failure: 0/3 done (0%), 1 in progress, 1 pending, 1 failed
`, r.Out)
	r = upgradeCmd(f, "", "status", "-w", "-o", "json")
	require.EqualError(t, r.Err, "--watch prints progress lines: it does not go with -o json")
}
