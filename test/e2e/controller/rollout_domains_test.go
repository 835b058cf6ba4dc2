package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// A rollout by domain driven by the controller (which reads the pool's topology and
// minNodes from its cache): 3 super pods of 2 nodes, one super pod at a time, each node
// cordoned once, every domain Done in the status with the time it was out.
func TestInClusterRolloutByDomain(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	waitLeader(t, r)
	ctx := context.Background()
	nodes := makePool(t, "ctl-dom", 6)
	for i, n := range nodes {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"huawei.com/topotree.superpodid":"sp-%d","huawei.com/topotree.rackid":"rack-1"}}}`, i/2+1)
		_, err := framework.C.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	var pool v1alpha1.Pool
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "ctl-dom"}, &pool))
	before := pool.DeepCopy() // a merge patch: the controller's status writes move the resourceVersion
	pool.Spec.Topology = &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend}
	require.NoError(t, c.Patch(ctx, &pool, client.MergeFrom(before)))
	stopAgent := playDriver(t, time.Second)
	defer stopAgent()
	cordons := countCordons(t, "ctl-dom")

	res := framework.C.Litepool(t, "upgrade", "driver", "--pool", "ctl-dom", "--version", target, "--installer-image", installer,
		"--max-unavailable-domains", "1", "--in-cluster", "-w", "--yes")
	require.Equal(t, 0, res.ExitCode, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	assert.Empty(t, res.Stderr, "the controller drives it, not the command")
	assert.Regexp(t, `driverrollout \S+: Succeeded: 6/6 nodes at 24.1.0.3\n$`, res.Stdout)
	for _, n := range nodes {
		assert.Equal(t, 1, cordons()[n], "cordons of %s", n)
		assert.False(t, framework.Node(t, n).Spec.Unschedulable, n)
	}
	// The progress lines show at most one super pod's nodes in progress at a time.
	assert.NotRegexp(t, `Progressing: \d/6 done \(\d+%\), [3-6] in progress`, res.Stdout)

	out := framework.C.MustLitepool(t, "upgrade", "status", "--pool", "ctl-dom", "-o", "json")
	var st struct {
		Rollouts []struct {
			Strategy                 string                         `json:"strategy"`
			DomainUnavailableSeconds int64                          `json:"domainUnavailableSeconds"`
			Domains                  []v1alpha1.DriverRolloutDomain `json:"domains"`
		} `json:"rollouts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Rollouts, 1)
	ro := st.Rollouts[0]
	assert.Equal(t, "Domain", ro.Strategy)
	require.Len(t, ro.Domains, 3)
	for _, d := range ro.Domains {
		assert.Equal(t, policy.RolloutDomainDone, d.State, d.Name)
		assert.Equal(t, int32(2), d.Done, d.Name)
	}
	t.Logf("domain-unavailable %ds over %d domains", ro.DomainUnavailableSeconds, len(ro.Domains))
}
