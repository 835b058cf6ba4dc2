package upgrade

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	superPodLabel = "huawei.com/topotree.superpodid"
	rackLabel     = "huawei.com/topotree.rackid"
	// Installs of a fixed, short length: the agent sets the driver label this long
	// after the installer pod appears.
	domainInstall = time.Second
)

// superPodPool is an Ascend pool of domains super pods × perDomain nodes (kwok nodes
// carrying MindCluster's labels), declaring the Ascend topology preset; it returns
// each node's super pod.
func superPodPool(t *testing.T, name string, domains, perDomain int) ([]string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	nodes := framework.AscendPool(t, name, domains*perDomain, oldDriver, software)
	domainOf := map[string]string{}
	for i, n := range nodes {
		sp := fmt.Sprintf("sp-%d", i/perDomain+1)
		domainOf[n] = sp
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q,%q:"rack-1"}}}`, superPodLabel, sp, rackLabel)
		_, err := framework.C.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	var pool v1alpha1.Pool
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, &pool))
	before := pool.DeepCopy() // a merge patch: the controller's status writes move the resourceVersion
	pool.Spec.Topology = &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend}
	require.NoError(t, c.Patch(ctx, &pool, client.MergeFrom(before)))
	return nodes, domainOf
}

// rollPool upgrades the pool with the plugin (no controller: it drives the rollout
// itself) and returns the rollout and the cluster's account of its cordons.
func rollPool(t *testing.T, pool string, pace ...string) (*v1alpha1.DriverRollout, *unschedulableWatch) {
	t.Helper()
	w := watchUnschedulable(t, pool)
	args := append([]string{"litepool", "upgrade", "driver", "--pool", pool, "--version", target, "--installer-image", installer,
		"--controller-timeout", "1s", "--yes"}, pace...)
	r := framework.C.Kubectl(t, "", args...)
	require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	ro := rolloutOf(t, pool)
	require.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	require.NotNil(t, ro.Status.StartTime)
	require.NotNil(t, ro.Status.CompletionTime)
	return ro, w
}

func wallOf(ro *v1alpha1.DriverRollout) time.Duration {
	return ro.Status.CompletionTime.Sub(ro.Status.StartTime.Time)
}

// A pool of 8 super pods × 4 nodes, rolled node by node (maxUnavailable 1) and, as a
// second pool of the same shape, by domain (maxUnavailableDomains 1), side by side: node by node
// breaks each super pod four times, by domain once, so its domain-unavailable time is
// lower. (Wall times are logged, not asserted: they are the machine's.)
func TestRolloutByDomainTakesEachSuperPodOutOnce(t *testing.T) {
	const domains, perDomain = 8, 4
	nodesN, _ := superPodPool(t, "upg-dn", domains, perDomain)
	nodesD, domainOfD := superPodPool(t, "upg-dd", domains, perDomain)
	startAgent(domainInstall, false, append(nodesN, nodesD...)...)

	// The dry run shows whole super pods per wave.
	dry := framework.C.MustLitepool(t, "upgrade", "driver", "--pool", "upg-dd", "--version", target, "--installer-image", installer,
		"--max-unavailable-domains", "1", "--dry-run=client")
	assert.Contains(t, dry, "(by domain, max unavailable domains 1):\n  wave 1: upg-dd-1, upg-dd-2, upg-dd-3, upg-dd-4\n  wave 2: upg-dd-5, upg-dd-6, upg-dd-7, upg-dd-8\n")

	// Both at once (two pools, two plugin processes): each rollout's own figures are
	// what is compared, and the pair takes as long as node by node alone.
	var byNode, byDomain *v1alpha1.DriverRollout
	var wn, wd *unschedulableWatch
	t.Run("rollouts", func(t *testing.T) {
		t.Run("node by node", func(t *testing.T) {
			t.Parallel()
			byNode, wn = rollPool(t, "upg-dn", "--max-unavailable", "1")
		})
		t.Run("by domain", func(t *testing.T) {
			t.Parallel()
			byDomain, wd = rollPool(t, "upg-dd", "--max-unavailable-domains", "1")
		})
	})
	require.False(t, t.Failed(), "both rollouts succeed")
	t.Logf("%d domains x %d nodes, installs of %s: node by node: wall %s, domain-unavailable %ds; by domain: wall %s, domain-unavailable %ds",
		domains, perDomain, domainInstall, wallOf(byNode), byNode.Status.DomainUnavailableSeconds,
		wallOf(byDomain), byDomain.Status.DomainUnavailableSeconds)
	assert.Less(t, byDomain.Status.DomainUnavailableSeconds, byNode.Status.DomainUnavailableSeconds,
		"by domain holds super pods out for less time than node by node")

	most, _ := wn.snapshot()
	assert.Equal(t, 1, most, "node by node: one node out at a time")
	most, cordons := wd.snapshot()
	assert.Equal(t, perDomain, most, "by domain: one whole super pod out at a time")
	for _, n := range nodesD {
		assert.Equal(t, 1, cordons[n], "cordons of %s", n)
		assert.Equal(t, target, framework.Node(t, n).Labels[framework.DriverLabel], n)
	}
	// The status counts each super pod, done whole.
	require.Len(t, byDomain.Status.Domains, domains)
	for _, d := range byDomain.Status.Domains {
		assert.Equal(t, policy.RolloutDomainDone, d.State, d.Name)
		assert.Equal(t, int32(perDomain), d.Done, d.Name)
	}
	assert.Equal(t, "sp-1", domainOfD[nodesD[0]])
	require.Len(t, byNode.Status.Domains, domains, "a node-by-node rollout of a pool with a topology is measured by domain too")

	out := framework.C.MustLitepool(t, "upgrade", "status", "--pool", "upg-dd")
	assert.Contains(t, out, "DOMAIN")
	assert.Regexp(t, `sp-1\s+\S+\s+Done\s+4/4\s+`, out)
	assert.Regexp(t, `wall time \S+, domain-unavailable \d+\.\d min\n`, out)
}

// A rollout by domain that would leave fewer than minNodes available is refused
// before anything changes (U6, the plugin's pre-flight; the webhook judges the same
// rule for any client).
func TestRolloutByDomainBelowMinNodesIsRefused(t *testing.T) {
	t.Parallel()
	nodes, _ := superPodPool(t, "upg-dmin", 2, 2)
	ctx := context.Background()
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	var pool v1alpha1.Pool
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "upg-dmin"}, &pool))
	before := pool.DeepCopy() // a merge patch: the controller's status writes move the resourceVersion
	pool.Spec.MinNodes = 3
	require.NoError(t, c.Patch(ctx, &pool, client.MergeFrom(before)))
	r := framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-dmin", "--version", target, "--installer-image", installer,
		"--max-unavailable-domains", "1", "--yes")
	assert.Equal(t, 1, r.ExitCode)
	assert.Contains(t, r.Stderr, `[U6] spec.maxUnavailableDomains 1 would leave 2 of pool "upg-dmin"'s 4 nodes available (its 1 largest domains hold 2), below its minNodes 3; accepted: none`)
	for _, n := range nodes {
		assert.Empty(t, framework.UpgradeState(t, n), n)
		assert.False(t, framework.Node(t, n).Spec.Unschedulable, n)
	}
}
