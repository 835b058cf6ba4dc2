package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// This cluster has no Kueue: a Pool with spec.queue gets the condition Queue=False
// saying so, no status.queue, and litepool creates nothing (Kueue's API group is not
// even served). Its other status is kept as before. docs/queueing.md.
func TestAQueueWithoutKueueChangesNothing(t *testing.T) {
	ctx := context.Background()
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	waitLeader(t, r)
	makePool(t, "ctl-queue", 1)
	pools := poolclient.New(framework.C.Dynamic)
	p, err := pools.Get(ctx, "ctl-queue")
	require.NoError(t, err)
	p.Spec.Queue = &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}
	_, err = pools.Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)

	var cond *metav1.Condition
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		got, err := pools.Get(ctx, "ctl-queue")
		if err != nil {
			return false, err
		}
		cond = apimeta.FindStatusCondition(got.Status.Conditions, "Queue")
		return cond != nil, nil
	}), "the Pool never said what became of its queue:\n%s", r.Logs.String())
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, "SchedulerNotInstalled", cond.Reason)
	assert.Equal(t, "Kueue is not installed: the cluster does not serve kueue.x-k8s.io/v1beta2 ResourceFlavor; litepool changed nothing (install Kueue, and the queue is written within a minute)", cond.Message)
	// The pool's other status goes on: its member's 8 GPUs are counted (the condition can
	// come first, from a pass that did not see the new member yet).
	var got *v1alpha1.Pool
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		got, err = pools.Get(ctx, "ctl-queue")
		return err == nil && got.Status.AcceleratorTotal == 8, err
	}), "the pool's other status goes on:\n%s", r.Logs.String())
	assert.Nil(t, got.Status.Queue)
	groups, err := framework.C.Kube.Discovery().ServerGroups()
	require.NoError(t, err)
	for _, g := range groups.Groups {
		assert.NotEqual(t, "kueue.x-k8s.io", g.Name)
	}
	desc := framework.C.MustLitepool(t, "describe", "pool", "ctl-queue")
	assert.Contains(t, desc, "Queue:")
	assert.Contains(t, desc, "<none> (Kueue is not installed")
}
