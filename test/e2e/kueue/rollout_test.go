package kueue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// A pool of two Ascend nodes (8 NPUs each) feeds Kueue; a driver rollout of one node
// takes its NPUs out of the quota from its cordon until it is done, then gives them back.
func TestQuotaFollowsADriverRollout(t *testing.T) {
	ctx := context.Background()
	const pool = "qroll"
	npu := corev1.ResourceName("huawei.com/Ascend910")
	nodes := framework.AscendPool(t, pool, 2, "23.0.6", v1alpha1.SoftwareSpec{})
	pools := poolclient.New(framework.C.Dynamic)
	// The status controller writes the new Pool's status meanwhile: read again on a conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pools.Get(ctx, pool)
		if err != nil {
			return err
		}
		p.Spec.Queue = &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}
		_, err = pools.Update(ctx, p, metav1.UpdateOptions{})
		return err
	}))
	waitQuotaOf := func(want string) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
			return nominalQuotaOf(t, pool, npu) == want, nil
		}), "ClusterQueue %s: quota %q of %s, want %q", pool, nominalQuotaOf(t, pool, npu), npu, want)
	}
	waitQuotaOf("16")

	agent := framework.StartDriverAgent(3 * time.Second)
	t.Cleanup(agent.Stop)
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "qroll-driver"},
		Spec: v1alpha1.DriverRolloutSpec{Nodes: []string{nodes[0]}, Version: "24.1.0.3",
			Installer: v1alpha1.DriverInstaller{Image: "registry.example.com/ascend-installer:24.1.0.3"}}}
	require.NoError(t, c.Create(ctx, ro))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ro) })

	waitQuotaOf("8")
	n := framework.Node(t, nodes[0])
	state := n.Annotations["runwhere.ai/upgrade-state"]
	t.Logf("quota 8 while %s is in the rollout (cordoned %v, upgrade state %q)", nodes[0], n.Spec.Unschedulable, state)
	assert.True(t, n.Spec.Unschedulable || (state != "" && state != "done"), "held out by the rollout")
	waitQuotaOf("16")
	framework.WaitUpgradeState(t, nodes[0], "done")
	assert.False(t, framework.Node(t, nodes[0]).Spec.Unschedulable)
}
